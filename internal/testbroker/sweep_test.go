package testbroker

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestSweep: the build directory of a process that has ended goes; this process's, one
// of a process alive and one of another shape stay.
func TestSweep(t *testing.T) {
	root := t.TempDir()
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	alive := exec.Command("sleep", "60")
	if err := alive.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { alive.Process.Kill(); alive.Wait() }()
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
	gone := dir(fmt.Sprintf("%s%d-123", binPrefix, ended.Process.Pid))
	keep := []string{
		dir(fmt.Sprintf("%s%d-456", binPrefix, os.Getpid())),
		dir(fmt.Sprintf("%s%d-789", binPrefix, alive.Process.Pid)),
		dir(binPrefix + "754924682"), // the shape before pids: whose it is, is not known
		dir("sluice-binary"),
	}
	sweep(root)
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Fatalf("%s of an ended process is still there (%v)", gone, err)
	}
	for _, d := range keep {
		if _, err := os.Stat(filepath.Join(d, "sluice")); err != nil {
			t.Fatalf("%s was removed: %v", d, err)
		}
	}
}
