package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"
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

// TestDirectFile: OpenDirect creates (or opens) a file with O_DIRECT where the filesystem
// takes it; WriteVec writes aligned buffers back to back; Allocate extends the file with
// zeros; Datasync succeeds; reads through another descriptor see the bytes.
func TestDirectFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	f, direct, err := Default().OpenDirect(path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	t.Logf("O_DIRECT: %v", direct)
	if err := f.Allocate(0, 4*DirectAlign); err != nil {
		t.Fatal(err)
	}
	if size, _ := f.Size(); size != 4*DirectAlign {
		t.Fatalf("allocated size %d", size)
	}
	mem := alignedMem(3 * DirectAlign)
	for i := range mem {
		mem[i] = byte(i%251 + 1)
	}
	n, err := f.WriteVec([][]byte{mem[:DirectAlign], mem[DirectAlign:]}, DirectAlign)
	if err != nil || n != 3*DirectAlign {
		t.Fatalf("WriteVec: %d %v", n, err)
	}
	if err := f.Datasync(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if len(b) != 4*DirectAlign || !bytes.Equal(b[DirectAlign:], mem) || !bytes.Equal(b[:DirectAlign], make([]byte, DirectAlign)) {
		t.Fatal("the file does not hold zeros, then what was written")
	}
	if f2, _, err := Default().OpenDirect(path, false); err != nil {
		t.Fatal(err)
	} else if size, _ := f2.Size(); size != 4*DirectAlign {
		t.Fatalf("reopened without create: size %d", size)
	} else {
		f2.Close()
	}
}

// TestAdvance: after a short write, WriteVec goes on from the first unwritten byte.
func TestAdvance(t *testing.T) {
	bufs := [][]byte{[]byte("abc"), []byte("de"), []byte("fgh")}
	for n, want := range []string{"abcdefgh", "bcdefgh", "cdefgh", "defgh", "efgh", "fgh", "gh", "h", ""} {
		var got []byte
		for _, b := range advance(bufs, n) {
			got = append(got, b...)
		}
		if string(got) != want {
			t.Fatalf("advance(%d) = %q, want %q", n, got, want)
		}
	}
	if string(bufs[0]) != "abc" {
		t.Fatal("advance changed the caller's buffers")
	}
}

// alignedMem returns n bytes at a DirectAlign-aligned address.
func alignedMem(n int) []byte {
	b := make([]byte, n+DirectAlign)
	skip := (DirectAlign - int(uintptr(unsafe.Pointer(&b[0]))%DirectAlign)) % DirectAlign
	return b[skip : skip+n]
}
