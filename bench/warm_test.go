package bench

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// resident returns how many of the file's pages are in the page cache (mincore of a
// mapping of it).
func resident(t *testing.T, path string) (in, all int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	// x/sys/unix has no wrapper for mincore(2).
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	for _, v := range vec {
		if v&1 != 0 {
			in++
		}
	}
	return in, len(vec)
}

// TestWarmFiles evicts a file in a nested directory from the page cache and checks that
// warmFiles reads every byte of it and brings it back.
func TestWarmFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "topic", "0", "00000000000000000000.log")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	// Written back, then dropped: clean pages leave the cache on POSIX_FADV_DONTNEED.
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	f.Close()
	in, all := resident(t, path)
	if in > all/2 {
		t.Skipf("this filesystem kept %d of %d pages cached after FADV_DONTNEED: cannot test the warming here", in, all)
	}
	n, err := warmFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(data)) {
		t.Fatalf("warmFiles read %d bytes, want %d", n, len(data))
	}
	if in, all := resident(t, path); in != all {
		t.Fatalf("after warmFiles %d of %d pages are cached, want all", in, all)
	}
}
