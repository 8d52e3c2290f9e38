package vfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestOSFS(t *testing.T) {
	fs := Default()
	dir := filepath.Join(t.TempDir(), "a", "b")
	if err := fs.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"c", "a", "b"} {
		if err := WriteFile(fs, dir, filepath.Join(dir, name), []byte(name+name), true); err != nil {
			t.Fatal(err)
		}
	}
	names, err := fs.List(dir)
	if err != nil || fmt.Sprint(names) != "[a b c]" {
		t.Fatalf("list: %v %v", names, err)
	}
	f, err := fs.OpenReadWrite(filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("xyz"), 1); err != nil {
		t.Fatal(err)
	}
	if size, _ := f.Size(); size != 4 {
		t.Fatalf("size %d", size)
	}
	if err := f.Truncate(2); err != nil || f.Sync() != nil || f.Fd() == 0 {
		t.Fatal("truncate, sync or fd failed")
	}
	b, _ := os.ReadFile(filepath.Join(dir, "b"))
	if string(b) != "bx" {
		t.Fatalf("content %q", b)
	}
	if size, err := fs.Stat(filepath.Join(dir, "b")); err != nil || size != 2 {
		t.Fatalf("stat %d %v", size, err)
	}
	if _, err := fs.Open(filepath.Join(dir, "missing")); !IsNotExist(err) {
		t.Fatalf("open missing: %v", err)
	}
	if err := fs.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "c")); err != nil {
		t.Fatal(err)
	}
	if err := fs.Remove(filepath.Join(dir, "c")); err != nil || fs.SyncDir(dir) != nil {
		t.Fatal("remove or syncdir failed")
	}
	if names, _ := fs.List(dir); fmt.Sprint(names) != "[b]" {
		t.Fatalf("after rename and remove: %v", names)
	}
}

func TestIsNoSpace(t *testing.T) {
	if !IsNoSpace(fmt.Errorf("wrapped: %w", syscall.ENOSPC)) || !IsNoSpace(syscall.EDQUOT) || IsNoSpace(syscall.EIO) || IsNoSpace(errors.New("x")) {
		t.Fatal("IsNoSpace misclassifies")
	}
}
