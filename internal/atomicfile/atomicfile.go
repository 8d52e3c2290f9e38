// Package atomicfile edits small files so that a reader sees either the old content or
// the new, never part of either: the new content is written to a temporary file in the
// same directory, synced, and renamed over the old one (then the directory is synced).
// Editors that may run at once (two `sluice user add`) are serialized by an flock on a
// lock file beside the target, so that neither loses the other's change.
//
// Concurrency: Update may be called from any goroutine and any process; callers of the
// same path are serialized by the lock file.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Update reads path (nil and exists false when there is no such file), calls edit with
// its content, and replaces the file with what edit returns, with mode perm and the
// replaced file's owner, holding an exclusive flock on path+".lock" throughout. When edit returns an error nothing is
// written and Update returns it.
func Update(path string, perm fs.FileMode, edit func(old []byte, exists bool) ([]byte, error)) error {
	unlock, err := lock(path + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	old, err := os.ReadFile(path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cannot read %s: %w", path, err)
	}
	data, err := edit(old, exists)
	if err != nil {
		return err
	}
	return Write(path, data, perm)
}

// Write replaces path with data, mode perm, through a synced temporary file and a rename.
func Write(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	err = keepOwner(tmp, path)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return syncDir(dir)
}

// keepOwner gives tmp the owner and group of the file it replaces, if they differ from
// the caller's (root editing a file the broker's user owns and must read).
func keepOwner(tmp *os.File, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return nil // nothing replaced: the caller's
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || int(sys.Uid) == os.Geteuid() && int(sys.Gid) == os.Getegid() {
		return nil
	}
	if err := tmp.Chown(int(sys.Uid), int(sys.Gid)); err != nil {
		return fmt.Errorf("cannot keep the owner of %s: %w", path, err)
	}
	return nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("cannot sync directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("cannot sync directory %s: %w", dir, err)
	}
	return nil
}

// lock takes an exclusive flock on path (created if missing) and returns its release.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot open lock file %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil // closing releases the flock
}
