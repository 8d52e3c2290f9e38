package dirlock

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestExclusive: a second Acquire of a held lock fails with ErrHeld and names the holder;
// after Release it succeeds. flock is per open file description, so two Acquires in one
// process conflict just as two processes do.
func TestExclusive(t *testing.T) {
	dir := t.TempDir()
	if err := CheckFree(dir); err != nil {
		t.Fatalf("a directory never locked: %v", err)
	}
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Acquire(dir)
	if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "pid") {
		t.Fatalf("second acquire: %v", err)
	}
	if err := CheckFree(dir); !errors.Is(err, ErrHeld) {
		t.Fatalf("check of a held lock: %v", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := CheckFree(dir); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

// TestHeldByAnotherProcess: a lock held by another process (flock(1) from util-linux,
// when the machine has it) is seen as held.
func TestHeldByAnotherProcess(t *testing.T) {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("flock(1) is not installed: TestExclusive covers the same conflict within one process")
	}
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/"+Name, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("flock", "-x", dir+"/"+Name, "sh", "-c", "echo locked; read x")
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	buf := make([]byte, 7)
	if _, err := out.Read(buf); err != nil || string(buf) != "locked\n" {
		t.Fatalf("flock did not start: %v %q", err, buf)
	}
	if _, err := Acquire(dir); !errors.Is(err, ErrHeld) {
		t.Fatalf("acquire of a lock another process holds: %v", err)
	}
}
