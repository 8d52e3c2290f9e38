// Package errorfs wraps a vfs.FS and injects I/O errors, for fault-injection tests.
//
// A real disk cannot be made to fail an fsync or run out of space on cue, so tests of
// storage error paths use this wrapper around the real filesystem (the one fake the
// project allows, and only for faults). An Injector decides, for every operation, whether
// it fails. Writes that fail with ENOSPC may first write part of their bytes, as a real
// full disk does; a *Torn error says exactly how many bytes reach the file and how many
// the write reports. Safe for concurrent use if the Injector is.
package errorfs

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"sluice/persist/vfs"
)

// Op names a filesystem operation.
type Op int

// The operations an Injector can fail.
const (
	OpCreate Op = iota
	OpOpen
	OpRead
	OpWrite
	OpSync
	OpTruncate
	OpRemove
	OpRename
	OpSyncDir
	OpList
	// OpAllocate is File.Allocate and File.Zero (fallocate).
	OpAllocate
	// OpDirect is the O_DIRECT flag of FS.OpenDirect: an error makes the file open
	// without it, as on a filesystem that refuses O_DIRECT (the error is not returned).
	OpDirect
)

// OpWrite covers File.WriteAt and File.WriteVec; OpSync covers File.Sync and
// File.Datasync.

var opNames = [...]string{"create", "open", "read", "write", "sync", "truncate", "remove", "rename", "syncdir", "list", "allocate", "direct"}

func (o Op) String() string { return opNames[o] }

// Injector decides whether an operation on a path fails, and with what error.
type Injector interface {
	MaybeError(op Op, path string) error
}

// Torn is an injected write error that first writes Keep bytes of the write (half of
// them when Keep is negative) and then reports Reported bytes written (the count really
// written when Reported is negative) with Err. Reported 0 after a partial write is what
// os.File.WriteAt returns when a short pwrite is followed by ENOSPC: bytes reached the
// file, yet the count says none did.
type Torn struct {
	Err      error
	Keep     int
	Reported int
}

func (t *Torn) Error() string {
	return "torn write (keep " + strconv.Itoa(t.Keep) + ", report " + strconv.Itoa(t.Reported) + "): " + t.Err.Error()
}

// Unwrap makes errors.Is(err, t.Err) true.
func (t *Torn) Unwrap() error { return t.Err }

// Rule fails operations that match Op and whose path ends with Suffix, after skipping the
// first Skip matches, at most Times times (0 means forever once started).
type Rule struct {
	Op     Op
	Suffix string
	Skip   int
	Times  int
	Err    error

	mu struct {
		sync.Mutex
		seen, fired int
	}
}

// MaybeError implements Injector.
func (r *Rule) MaybeError(op Op, path string) error {
	if op != r.Op || !strings.HasSuffix(path, r.Suffix) {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.seen++
	if r.mu.seen <= r.Skip || (r.Times > 0 && r.mu.fired >= r.Times) {
		return nil
	}
	r.mu.fired++
	return r.Err
}

// Fired reports how many times the rule injected its error.
func (r *Rule) Fired() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.fired
}

// FS wraps an inner filesystem with an Injector.
type FS struct {
	inner vfs.FS
	inj   Injector
}

// Wrap returns inner with faults from inj injected.
func Wrap(inner vfs.FS, inj Injector) *FS { return &FS{inner: inner, inj: inj} }

func (fs *FS) check(op Op, path string) error { return fs.inj.MaybeError(op, path) }

// Create implements vfs.FS.
func (fs *FS) Create(name string) (vfs.File, error) {
	if err := fs.check(OpCreate, name); err != nil {
		return nil, &pathError{"create", name, err}
	}
	f, err := fs.inner.Create(name)
	if err != nil {
		return nil, err
	}
	return &file{File: f, fs: fs}, nil
}

// OpenReadWrite implements vfs.FS.
func (fs *FS) OpenReadWrite(name string) (vfs.File, error) {
	if err := fs.check(OpOpen, name); err != nil {
		return nil, &pathError{"open", name, err}
	}
	f, err := fs.inner.OpenReadWrite(name)
	if err != nil {
		return nil, err
	}
	return &file{File: f, fs: fs}, nil
}

// Open implements vfs.FS.
func (fs *FS) Open(name string) (vfs.File, error) {
	if err := fs.check(OpOpen, name); err != nil {
		return nil, &pathError{"open", name, err}
	}
	f, err := fs.inner.Open(name)
	if err != nil {
		return nil, err
	}
	return &file{File: f, fs: fs}, nil
}

// OpenDirect implements vfs.FS. It checks OpCreate (create set) or OpOpen, then OpDirect:
// an error there opens the file without O_DIRECT.
func (fs *FS) OpenDirect(name string, create bool) (vfs.File, bool, error) {
	op, opName := OpOpen, "open"
	if create {
		op, opName = OpCreate, "create"
	}
	if err := fs.check(op, name); err != nil {
		return nil, false, &pathError{opName, name, err}
	}
	if fs.check(OpDirect, name) == nil {
		f, direct, err := fs.inner.OpenDirect(name, create)
		if err != nil {
			return nil, false, err
		}
		return &file{File: f, fs: fs}, direct, nil
	}
	var f vfs.File
	var err error
	if create {
		f, err = fs.inner.Create(name)
	} else {
		f, err = fs.inner.OpenReadWrite(name)
	}
	if err != nil {
		return nil, false, err
	}
	return &file{File: f, fs: fs}, false, nil
}

// Remove implements vfs.FS.
func (fs *FS) Remove(name string) error {
	if err := fs.check(OpRemove, name); err != nil {
		return &pathError{"remove", name, err}
	}
	return fs.inner.Remove(name)
}

// Rename implements vfs.FS.
func (fs *FS) Rename(oldname, newname string) error {
	if err := fs.check(OpRename, newname); err != nil {
		return &pathError{"rename", newname, err}
	}
	return fs.inner.Rename(oldname, newname)
}

// MkdirAll implements vfs.FS.
func (fs *FS) MkdirAll(dir string) error { return fs.inner.MkdirAll(dir) }

// List implements vfs.FS.
func (fs *FS) List(dir string) ([]string, error) {
	if err := fs.check(OpList, dir); err != nil {
		return nil, &pathError{"list", dir, err}
	}
	return fs.inner.List(dir)
}

// Stat implements vfs.FS.
func (fs *FS) Stat(name string) (int64, error) { return fs.inner.Stat(name) }

// ModTime implements vfs.FS.
func (fs *FS) ModTime(name string) (time.Time, error) { return fs.inner.ModTime(name) }

// SyncDir implements vfs.FS.
func (fs *FS) SyncDir(dir string) error {
	if err := fs.check(OpSyncDir, dir); err != nil {
		return &pathError{"syncdir", dir, err}
	}
	return fs.inner.SyncDir(dir)
}

type file struct {
	vfs.File
	fs *FS
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.check(OpRead, f.Name()); err != nil {
		return 0, &pathError{"read", f.Name(), err}
	}
	return f.File.ReadAt(p, off)
}

// WriteAt writes half of p before failing with ENOSPC, like a disk that fills mid-write,
// and does what a *Torn error says.
func (f *file) WriteAt(p []byte, off int64) (int, error) {
	err := f.fs.check(OpWrite, f.Name())
	if err == nil {
		return f.File.WriteAt(p, off)
	}
	var torn *Torn
	n := 0
	switch {
	case errors.As(err, &torn):
		keep := torn.Keep
		if keep < 0 || keep > len(p) {
			keep = len(p) / 2
		}
		n, _ = f.File.WriteAt(p[:keep], off)
		if torn.Reported >= 0 {
			n = torn.Reported
		}
	case err == syscall.ENOSPC && len(p) > 1:
		n, _ = f.File.WriteAt(p[:len(p)/2], off)
	}
	return n, &pathError{"write", f.Name(), err}
}

// WriteVec fails like WriteAt: a *Torn error or ENOSPC first writes part of the bytes,
// rounded down to whole vfs.DirectAlign blocks (the unit a device writes, and all that a
// file opened with O_DIRECT accepts).
func (f *file) WriteVec(bufs [][]byte, off int64) (int, error) {
	err := f.fs.check(OpWrite, f.Name())
	if err == nil {
		return f.File.WriteVec(bufs, off)
	}
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	var torn *Torn
	n, keep := 0, -1
	switch {
	case errors.As(err, &torn):
		keep = torn.Keep
		if keep < 0 || keep > total {
			keep = total / 2
		}
	case err == syscall.ENOSPC:
		keep = total / 2
	}
	if keep = keep &^ (vfs.DirectAlign - 1); keep > 0 {
		n, _ = f.File.WriteVec(prefix(bufs, keep), off)
	}
	if torn != nil && torn.Reported >= 0 {
		n = torn.Reported
	}
	return n, &pathError{"write", f.Name(), err}
}

// prefix returns the first n bytes of bufs.
func prefix(bufs [][]byte, n int) [][]byte {
	var out [][]byte
	for _, b := range bufs {
		if n <= 0 {
			break
		}
		b = b[:min(len(b), n)]
		out, n = append(out, b), n-len(b)
	}
	return out
}

func (f *file) Datasync() error {
	if err := f.fs.check(OpSync, f.Name()); err != nil {
		return &pathError{"datasync", f.Name(), err}
	}
	return f.File.Datasync()
}

func (f *file) Allocate(off, n int64) error {
	if err := f.fs.check(OpAllocate, f.Name()); err != nil {
		return &pathError{"allocate", f.Name(), err}
	}
	return f.File.Allocate(off, n)
}

// Zero is checked as OpAllocate: both are fallocate.
func (f *file) Zero(off, n int64) error {
	if err := f.fs.check(OpAllocate, f.Name()); err != nil {
		return &pathError{"allocate", f.Name(), err}
	}
	return f.File.Zero(off, n)
}

func (f *file) Sync() error {
	if err := f.fs.check(OpSync, f.Name()); err != nil {
		return &pathError{"sync", f.Name(), err}
	}
	return f.File.Sync()
}

func (f *file) Truncate(size int64) error {
	if err := f.fs.check(OpTruncate, f.Name()); err != nil {
		return &pathError{"truncate", f.Name(), err}
	}
	return f.File.Truncate(size)
}

type pathError struct {
	op, path string
	err      error
}

func (e *pathError) Error() string { return "injected: " + e.op + " " + e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }
