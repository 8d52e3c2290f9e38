package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// TestUpdate: a missing file is created with the mode asked for, an edit error writes
// nothing, and concurrent editors lose no change.
func TestUpdate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	err := Update(path, 0o600, func(old []byte, exists bool) ([]byte, error) {
		if exists || old != nil {
			t.Fatalf("missing file read as %q", old)
		}
		return []byte("0"), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", st.Mode(), err)
	}
	boom := errors.New("boom")
	if err := Update(path, 0o600, func([]byte, bool) ([]byte, error) { return nil, boom }); err != boom {
		t.Fatalf("edit error: %v", err)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			err := Update(path, 0o600, func(old []byte, _ bool) ([]byte, error) {
				n, err := strconv.Atoi(string(old))
				return []byte(strconv.Itoa(n + 1)), err
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got, _ := os.ReadFile(path); string(got) != "20" {
		t.Fatalf("after 20 increments: %q", got)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".f.tmp-*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}
