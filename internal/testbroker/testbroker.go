// Package testbroker starts real sluice broker processes for tests: it builds cmd/sluice
// once per test binary, runs `sluice broker` on a loopback port with a data directory, waits
// until the broker says it serves, and stops the process by its pid when the test ends.
//
// A Broker is used by one test goroutine at a time.
package testbroker

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sluice/internal/loopport"
	"sluice/internal/spawn"
)

// binary is built once per test process; the lock also guards the path.
var binary struct {
	sync.Mutex
	path string
	err  error
	lock *os.File // held until the process ends: its directory is in use (sweep)
}

// Binary returns the path of a freshly built sluice binary (built once per test process).
func Binary(t testing.TB) string {
	t.Helper()
	binary.Lock()
	defer binary.Unlock()
	if binary.path == "" && binary.err == nil {
		sweep(os.TempDir())
		dir, err := os.MkdirTemp("", binPrefix)
		if err != nil {
			t.Fatal(err)
		}
		if binary.lock, err = claim(dir); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "sluice")
		// failpoints: the tests that show a panic is answered and counted inject one.
		args := []string{"build", "-tags", "failpoints", "-o", path}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, "sluice/cmd/sluice")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			binary.err = fmt.Errorf("cannot build sluice: %v\n%s", err, out)
		} else {
			binary.path = path
		}
	}
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

// Broker is a running broker process.
type Broker struct {
	t    testing.TB
	Dir  string // data directory
	Addr string // host:port it serves
	// MetricsAddr is the metrics endpoint's host:port, when started with -metrics.
	MetricsAddr string
	args        []string
	env         []string
	cmd         *exec.Cmd
	log         *syncBuffer
	done        chan struct{}
}

// Start runs `sluice broker --data dir --listen 127.0.0.1:port args...` and waits until it
// serves. The port is below the kernel's ephemeral range (loopport; on a kernel whose
// range starts below 21000, one from it), so that no outgoing connection on the host
// takes it while the broker is down between a Kill and a Restart.
// The process is stopped (SIGTERM, then SIGKILL) when the test ends.
func Start(t testing.TB, dir string, args ...string) *Broker {
	t.Helper()
	return StartEnv(t, dir, nil, args...)
}

// StartEnv is Start with extra environment variables ("KEY=value") for the process, such
// as SLUICE_FAILPOINTS.
func StartEnv(t testing.TB, dir string, env []string, args ...string) *Broker {
	t.Helper()
	b := &Broker{t: t, Dir: dir, args: args, env: env}
	t.Cleanup(func() { b.Stop() })
	// The port was free when picked; another process asking for the same number may bind
	// it before the broker does. Before the first start the port is still ours to choose.
	for attempt := 1; ; attempt++ {
		listen, err := loopport.Addr()
		if err != nil {
			t.Fatal(err)
		}
		if b.start(listen, attempt < bindAttempts) {
			return b
		}
		t.Logf("the broker could not bind %s; starting it on another port", listen)
	}
}

// bindAttempts bounds the first starts of a broker whose port was taken meanwhile.
const bindAttempts = 3

// start runs the broker on listen and waits until it serves. When retryBind is set and
// the broker exits because listen is taken, start returns false (the caller picks another
// port); every other failure fails the test.
func (b *Broker) start(listen string, retryBind bool) bool {
	b.t.Helper()
	ready := filepath.Join(b.t.TempDir(), "ready")
	args := []string{"broker", "--data", b.Dir, "--listen", listen, "--ready-file", ready}
	if b.MetricsAddr != "" { // a restart keeps its metrics address, unless args name one (the last flag wins)
		args = append(args, "--metrics", b.MetricsAddr)
	}
	args = append(args, b.args...)
	b.cmd = exec.Command(Binary(b.t), args...)
	if len(b.env) > 0 {
		b.cmd.Env = append(os.Environ(), b.env...)
	}
	b.log = &syncBuffer{}
	b.cmd.Stdout, b.cmd.Stderr = b.log, b.log
	// Killed with the test binary (a Ctrl-C, a test timeout: no cleanup runs), and in a
	// process group of its own, so that a broker a test stops (SIGSTOP) gets no SIGHUP
	// when the test binary's group is orphaned (the shell that started it exits).
	if err := spawn.Start(b.cmd); err != nil {
		b.t.Fatal(err)
	}
	b.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { cmd.Wait(); close(done) }(b.cmd, b.done)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if raw, err := os.ReadFile(ready); err == nil && len(raw) > 0 {
			lines := strings.Fields(string(raw))
			b.Addr = lines[0]
			if len(lines) > 1 {
				b.MetricsAddr = lines[1]
			}
			return true
		}
		select {
		case <-b.done:
			if retryBind && strings.Contains(b.log.String(), "cannot listen on "+listen) {
				b.cmd = nil
				return false
			}
			b.t.Fatalf("broker exited before serving: %v\n%s", b.cmd.ProcessState, b.log.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Kill()
			b.t.Fatalf("broker did not serve within a minute\n%s", b.log.String())
		}
	}
}

// Kill stops the broker with SIGKILL and waits for it.
func (b *Broker) Kill() {
	if b.cmd == nil {
		return
	}
	b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.done
	b.cmd = nil
}

// Stop asks the broker to shut down (SIGTERM: everything accepted becomes durable) and
// waits up to 30 s before killing it. It returns the process's exit error, if any.
func (b *Broker) Stop() error {
	if b.cmd == nil {
		return nil
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(30 * time.Second):
		b.t.Errorf("broker ignored SIGTERM for 30 s; killing it\n%s", b.log.String())
		b.cmd.Process.Signal(syscall.SIGKILL)
		<-b.done
	}
	err := b.cmd.ProcessState
	b.cmd = nil
	if !err.Success() {
		return fmt.Errorf("broker exited with %v\n%s", err, b.log.String())
	}
	return nil
}

// Restart starts the broker again on the same data directory and address.
func (b *Broker) Restart() {
	b.t.Helper()
	if b.cmd != nil {
		b.t.Fatal("Restart of a running broker")
	}
	b.start(b.Addr, false)
}

// Pid returns the broker's process id, or 0 when it is not running.
func (b *Broker) Pid() int {
	if b.cmd == nil {
		return 0
	}
	return b.cmd.Process.Pid
}

// Log returns what the broker printed so far.
func (b *Broker) Log() string { return b.log.String() }

// syncBuffer is a bytes.Buffer the process's output goroutines and the test share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}
