package testbroker

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestSweep: a build directory whose lock nobody holds (its process ended) goes; one
// whose lock is held, one without a lock file and one of another name stay. The holder
// here is this process through a second open file: flock locks of two open files
// conflict even within one process, as they do across processes and PID namespaces.
func TestSweep(t *testing.T) {
	root := t.TempDir()
	dir := func(name string) string {
		d := filepath.Join(root, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "sluice"), []byte("binary"), 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	ended := dir(binPrefix + "ended")
	f, err := claim(ended)
	if err != nil {
		t.Fatal(err)
	}
	f.Close() // the process ends: its lock goes with it
	live := dir(binPrefix + "live")
	held, err := claim(live)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	keep := []string{live, dir(binPrefix + "754924682"), dir("sluice-binary")}
	sweep(root)
	if _, err := os.Stat(ended); !os.IsNotExist(err) {
		t.Fatalf("%s of an ended process is still there (%v)", ended, err)
	}
	for _, d := range keep {
		if _, err := os.Stat(filepath.Join(d, "sluice")); err != nil {
			t.Fatalf("%s was removed: %v", d, err)
		}
	}
	// The live directory's lock is still its owner's: the sweep's look closed its own
	// open file only.
	other, err := os.Open(filepath.Join(live, lockName))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != syscall.EWOULDBLOCK {
		t.Fatalf("locking the live directory's file again: %v, want EWOULDBLOCK (the owner lost its lock)", err)
	}
}
