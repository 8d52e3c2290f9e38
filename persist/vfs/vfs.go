// Package vfs is the filesystem interface that sluice's storage code writes through.
//
// Storage never calls the os package directly: it takes an FS, so tests can inject I/O
// faults (package errorfs) under the real code paths. Default is the operating system's
// filesystem. Implementations must be safe for concurrent use; a File is safe for
// concurrent ReadAt and WriteAt on disjoint ranges, like an *os.File.
package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"syscall"
)

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
	// SyncDir makes the directory's entries (created, renamed, removed files) durable.
	SyncDir(dir string) error
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
