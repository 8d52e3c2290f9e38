// Package peer runs the real services tests need next to sluice (HDFS, ZooKeeper) as
// JVMs: it installs them once per test binary with the repository's scripts (cached
// outside the repo), starts them with a given class path, and stops them by pid. A JVM
// dies with the test binary, and runs in a process group of its own, so that one stopped
// by a test (SIGSTOP) gets no SIGHUP when the test binary's group is orphaned (the shell
// that started it exits): internal/spawn.
package peer

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sluice/internal/loopport"
	"sluice/internal/spawn"
)

var installs struct {
	mu   sync.Mutex
	done map[string]result
}

type result struct {
	home string
	err  error
}

// Install returns the install directory of a peer: the environment variable env when
// set (the Makefile passes it), else what scripts/<script> prints, run once per test
// binary (the script caches the install).
func Install(script, env string) (string, error) {
	if h := os.Getenv(env); h != "" {
		return h, nil
	}
	installs.mu.Lock()
	defer installs.mu.Unlock()
	if r, ok := installs.done[script]; ok {
		return r.home, r.err
	}
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "scripts", script)
	var stderr bytes.Buffer
	cmd := exec.Command(path)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	r := result{home: strings.TrimSpace(string(out))}
	if err != nil {
		r.err = fmt.Errorf("cannot install with %s: %w: %s", path, err, stderr.String())
	}
	if installs.done == nil {
		installs.done = map[string]result{}
	}
	installs.done[script] = r
	return r.home, r.err
}

// Fail fails t for a peer that cannot run here, or skips it, saying why, when the
// environment variable skipEnv is 1 (never set by `make test` or CI).
func Fail(t testing.TB, skipEnv string, err error) {
	t.Helper()
	if os.Getenv(skipEnv) == "1" {
		t.Skipf("%s=1 and a service the test needs cannot start here: %v", skipEnv, err)
	}
	t.Fatal(err)
}

// FreePort returns a loopback port that was free a moment ago (a service that must keep
// its port across restarts is given one): below the kernel's ephemeral range, so that no
// outgoing connection takes it while the service is down for a restart (loopport; on a
// kernel whose range starts below 21000, a port from the range).
func FreePort() (int, error) { return loopport.Free() }

// BindFailed reports whether the JVM log at path says a server could not bind its port
// (java.net.BindException): its port, free when picked (FreePort), was taken before the
// JVM bound it.
func BindFailed(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && bytes.Contains(b, []byte("java.net.BindException"))
}

// HeldPort returns a loopback port that a listener holds until t ends: for a test of a
// server that must move off a port taken between its pick and its bind.
func HeldPort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// CheckMovedOff fails t unless a server at addr is off the held port and the log at
// path (its first start's) shows the failed bind.
func CheckMovedOff(t testing.TB, addr string, held int, path string) {
	t.Helper()
	if strings.HasSuffix(addr, fmt.Sprintf(":%d", held)) {
		t.Fatalf("the server is at %s, the held port", addr)
	}
	if !BindFailed(path) {
		t.Fatalf("the first start's log %s does not show the failed bind", path)
	}
}

// Proc is a started JVM.
type Proc struct {
	Cmd    *exec.Cmd
	Exited chan struct{} // closed once it has exited
}

// Java starts java with args, its output appended to dir/logName.
func Java(dir, logName string, args ...string) (*Proc, error) {
	log, err := os.OpenFile(filepath.Join(dir, logName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command("java", args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := spawn.Start(cmd); err != nil { // see the package doc
		return nil, fmt.Errorf("cannot start java: %w", err)
	}
	p := &Proc{Cmd: cmd, Exited: make(chan struct{})}
	go func() { cmd.Wait(); close(p.Exited) }()
	return p, nil
}

// Stop ends the JVM by its pid: SIGTERM, SIGKILL after 20 s; it waits for the exit.
func (p *Proc) Stop() {
	p.Cmd.Process.Signal(syscall.SIGCONT) // a paused JVM does not handle SIGTERM
	p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.Exited:
	case <-time.After(20 * time.Second):
		p.Kill()
	}
}

// Kill kills the JVM (SIGKILL) and waits for the exit.
func (p *Proc) Kill() {
	p.Cmd.Process.Kill()
	<-p.Exited
}

// Tail returns the end of dir/name (a log), for error messages.
func Tail(dir, name string) string {
	b, _ := os.ReadFile(filepath.Join(dir, name))
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}
