package local

import (
	"fmt"
	"path/filepath"

	"sluice/persist/vfs"
)

func dirOf(path string) string { return filepath.Dir(path) }

func dirJoin(dir, name string) string { return filepath.Join(dir, name) }

// readAll reads a whole small file (an index).
func readAll(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open %s: %w", path, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("cannot stat %s: %w", path, err)
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && size > 0 {
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	return b, nil
}

// renameIfExists renames path to to, and reports false for a file that is already gone.
func renameIfExists(fs vfs.FS, path, to string) (bool, error) {
	if err := fs.Rename(path, to); err != nil {
		if vfs.IsNotExist(err) {
			return false, nil
		}
		return false, fmt.Errorf("cannot rename %s to %s: %w", path, to, err)
	}
	return true, nil
}

// removeIfExists removes path, ignoring a file that is already gone.
func removeIfExists(fs vfs.FS, path string) error {
	if err := fs.Remove(path); err != nil && !vfs.IsNotExist(err) {
		return fmt.Errorf("cannot remove %s: %w", path, err)
	}
	return nil
}
