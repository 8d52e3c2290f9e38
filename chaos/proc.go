package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"sluice/internal/spawn"
)

// proc is one process the harness started. Its output is appended to a log file of its
// own in the run's directory (kept across restarts, for the report's findings).
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once it has exited
}

// procs is every process a run started and has not seen exit, by pid: stopAll ends
// them all, also when the run fails or is interrupted.
type procs struct {
	logDir string
	mu     struct {
		sync.Mutex
		live map[int]*proc
	}
}

func newProcs(logDir string) *procs {
	ps := &procs{logDir: logDir}
	ps.mu.live = map[int]*proc{}
	return ps
}

// start runs argv with its output appended to logDir/name.log. The process gets
// SIGKILL if the harness dies first, so a crashed harness leaves nothing, and runs in a
// process group of its own (spawn.Start): in the harness's group, a process stopped by a
// pause fault when the shell that started the harness exits is in an orphaned group
// with a stopped member, and the kernel sends it SIGHUP (a NameNode died of it;
// RELIABILITY.md).
func (ps *procs) start(name string, argv []string) (*proc, error) {
	log, err := os.OpenFile(filepath.Join(ps.logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cannot open log of %s: %w", name, err)
	}
	defer log.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := spawn.Start(cmd); err != nil {
		return nil, fmt.Errorf("cannot start %s: %w", name, err)
	}
	fmt.Fprintf(log, "=== %s pid %d: %s\n", time.Now().Format(time.RFC3339Nano), cmd.Process.Pid, strings.Join(argv, " "))
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	ps.mu.Lock()
	ps.mu.live[cmd.Process.Pid] = p
	ps.mu.Unlock()
	go func() {
		cmd.Wait()
		ps.mu.Lock()
		delete(ps.mu.live, cmd.Process.Pid)
		ps.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// pid returns the process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits for the exit.
func (p *proc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM (after SIGCONT: a stopped process does not handle it) and waits up
// to grace for the exit before SIGKILL. It reports whether the process exited by itself.
func (p *proc) stop(grace time.Duration) bool {
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return true
	case <-time.After(grace):
		p.kill()
		return false
	}
}

// signal sends sig (SIGSTOP, SIGCONT) without waiting.
func (p *proc) signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("cannot signal %s (pid %d): %w", p.name, p.pid(), err)
	}
	return nil
}

// stopAll ends every process still running, by pid: SIGTERM, then SIGKILL after grace.
func (ps *procs) stopAll(grace time.Duration) {
	ps.mu.Lock()
	live := make([]*proc, 0, len(ps.mu.live))
	for _, p := range ps.mu.live {
		live = append(live, p)
	}
	ps.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range live {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(grace) }()
	}
	wg.Wait()
}
