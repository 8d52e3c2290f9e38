// Package vfs is the filesystem interface that sluice's storage code writes through.
//
// Storage never calls the os package directly: it takes an FS, so tests can inject I/O
// faults (package errorfs) under the real code paths. Default is the operating system's
// filesystem. Implementations must be safe for concurrent use; a File is safe for
// concurrent ReadAt and WriteAt on disjoint ranges, like an *os.File.
//
// Direct writes. OpenDirect opens a file with O_DIRECT, so that writes go from the
// caller's memory to the device without a copy into the page cache. Such writes must be
// aligned to DirectAlign: every buffer's address and length, and the file position.
// Where the filesystem refuses O_DIRECT, OpenDirect opens the file without it and says
// so; the same aligned writes then go through the page cache.
package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DirectAlign is the alignment of the memory, file positions and lengths of writes to a
// file opened by OpenDirect: the logical block of the devices sluice runs on (512 or
// 4096 bytes; 4096 covers both).
const DirectAlign = 4096

// File is an open file. Positional reads and writes only: no shared file offset, so
// readers on other goroutines never race the writer's position.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Sync flushes the file's data and metadata to stable storage (fsync).
	Sync() error
	// Truncate changes the size of the file.
	Truncate(size int64) error
	// Size returns the current size of the file.
	Size() (int64, error)
	// Fd returns the file descriptor, for sendfile. It stays valid until Close.
	Fd() uintptr
	// Name returns the path the file was opened with.
	Name() string
	// WriteVec writes bufs back to back at off (pwritev) and returns the bytes written:
	// all of them unless err is set. On a file opened with O_DIRECT, every buffer's
	// address and length and off must be multiples of DirectAlign.
	WriteVec(bufs [][]byte, off int64) (int, error)
	// Datasync flushes the file's data, and the metadata needed to read it back (such
	// as its size), to stable storage (fdatasync).
	Datasync() error
	// Allocate reserves disk space for [off, off+n) and extends the file to cover it
	// (fallocate, mode 0): the new bytes read as zeros, and later writes there change no
	// size. A filesystem without it returns an error wrapping errors.ErrUnsupported.
	Allocate(off, n int64) error
	// Zero makes [off, off+n) read as zeros, extending the file to cover it, while its
	// disk space stays allocated (fallocate FALLOC_FL_ZERO_RANGE): the filesystem marks
	// the blocks unwritten instead of freeing them, so it issues no discard, and later
	// writes there allocate nothing. A filesystem without it returns an error wrapping
	// errors.ErrUnsupported.
	Zero(off, n int64) error
}

// FS is a filesystem.
type FS interface {
	// Create creates or truncates the named file for reading and writing.
	Create(name string) (File, error)
	// OpenReadWrite opens an existing file for reading and writing.
	OpenReadWrite(name string) (File, error)
	// Open opens an existing file read-only.
	Open(name string) (File, error)
	// Remove removes the named file.
	Remove(name string) error
	// Rename renames a file, replacing newname if it exists.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and its parents.
	MkdirAll(dir string) error
	// List returns the names of the entries of dir, sorted.
	List(dir string) ([]string, error)
	// Stat returns the size of the named file.
	Stat(name string) (int64, error)
	// ModTime returns when the named file was last written.
	ModTime(name string) (time.Time, error)
	// SyncDir makes the directory's entries (created, renamed, removed files) durable.
	SyncDir(dir string) error
	// OpenDirect opens name for reading and writing with O_DIRECT, creating it (or
	// truncating it to nothing) when create is set. Where the filesystem refuses
	// O_DIRECT (EINVAL), it opens the file without it and direct is false.
	OpenDirect(name string, create bool) (f File, direct bool, err error)
}

// Default returns the operating system's filesystem.
func Default() FS { return osFS{} }

type osFS struct{}

type osFile struct{ *os.File }

func (f osFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) OpenReadWrite(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) OpenDirect(name string, create bool) (File, bool, error) {
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(name, flags|syscall.O_DIRECT, 0o644)
	if err == nil {
		return osFile{f}, true, nil
	}
	if !errors.Is(err, syscall.EINVAL) {
		return nil, false, err
	}
	if f, err = os.OpenFile(name, flags, 0o644); err != nil {
		return nil, false, err
	}
	return osFile{f}, false, nil
}

// iovMax is the most buffers one pwritev takes (IOV_MAX on Linux).
const iovMax = 1024

func (f osFile) WriteVec(bufs [][]byte, off int64) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	total := 0
	for len(bufs) > 0 {
		var n int
		var werr error
		if err := rc.Write(func(fd uintptr) bool {
			n, werr = unix.Pwritev(int(fd), bufs[:min(len(bufs), iovMax)], off)
			return true
		}); err != nil {
			return total, err
		}
		if werr == unix.EINTR {
			continue
		}
		if werr != nil {
			return total, &os.PathError{Op: "pwritev", Path: f.Name(), Err: werr}
		}
		if n == 0 {
			return total, &os.PathError{Op: "pwritev", Path: f.Name(), Err: io.ErrShortWrite}
		}
		total, off = total+n, off+int64(n)
		bufs = advance(bufs, n)
	}
	return total, nil
}

// advance drops the first n bytes of bufs. It copies the slice header list only when a
// buffer is cut (a short write), never the caller's buffers.
func advance(bufs [][]byte, n int) [][]byte {
	for len(bufs) > 0 && n >= len(bufs[0]) {
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	if n > 0 {
		bufs = append([][]byte{bufs[0][n:]}, bufs[1:]...)
	}
	return bufs
}

func (f osFile) Datasync() error {
	return f.control("fdatasync", func(fd int) error { return unix.Fdatasync(fd) })
}

func (f osFile) Allocate(off, n int64) error { return f.fallocate(0, off, n) }

func (f osFile) Zero(off, n int64) error { return f.fallocate(unix.FALLOC_FL_ZERO_RANGE, off, n) }

// fallocate runs fallocate(2) with mode; a filesystem without it (or without the mode)
// gives an error wrapping errors.ErrUnsupported.
func (f osFile) fallocate(mode uint32, off, n int64) error {
	err := f.control("fallocate", func(fd int) error { return unix.Fallocate(fd, mode, off, n) })
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("%w: %w", errors.ErrUnsupported, err)
	}
	return err
}

// control runs op on the file's descriptor, again after EINTR.
func (f osFile) control(name string, op func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var oerr error
	if err := rc.Control(func(fd uintptr) {
		for oerr = op(int(fd)); oerr == unix.EINTR; oerr = op(int(fd)) {
		}
	}); err != nil {
		return err
	}
	if oerr != nil {
		return &os.PathError{Op: name, Path: f.Name(), Err: oerr}
	}
	return nil
}

// AdviseSequential tells the kernel that f will be read sequentially
// (POSIX_FADV_SEQUENTIAL: a larger readahead window). Advice only: a failure changes
// nothing and is ignored.
func AdviseSequential(f File) {
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_SEQUENTIAL)
}

func (osFS) Remove(name string) error             { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string) error            { return os.MkdirAll(dir, 0o755) }

// List reads names only (no DirEntry values): opening a partition with thousands of
// segments lists its directory, and that should cost one string per file.
func (osFS) List(dir string) ([]string, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

func (osFS) Stat(name string) (int64, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (osFS) ModTime(name string) (time.Time, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return time.Time{}, err
	}
	return fi.ModTime(), nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// IsNoSpace reports whether err is (or wraps) ENOSPC or EDQUOT: the disk or quota is full.
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// IsNotExist reports whether err says a file does not exist.
func IsNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }

// WriteFile writes data to name through a temporary file and a rename, and syncs both the
// file and the directory when sync is set, so a crash leaves either the old file or the new
// one, never a torn one.
func WriteFile(fs FS, dir, name string, data []byte, sync bool) error {
	tmp := name + ".tmp"
	f, err := fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("cannot create %s: %w", tmp, err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return fmt.Errorf("cannot write %s: %w", tmp, err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			f.Close()
			return fmt.Errorf("cannot sync %s: %w", tmp, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cannot close %s: %w", tmp, err)
	}
	if err := fs.Rename(tmp, name); err != nil {
		return fmt.Errorf("cannot rename %s: %w", tmp, err)
	}
	if sync {
		if err := fs.SyncDir(dir); err != nil {
			return fmt.Errorf("cannot sync directory %s: %w", dir, err)
		}
	}
	return nil
}
