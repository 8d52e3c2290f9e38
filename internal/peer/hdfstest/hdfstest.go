// Package hdfstest runs a real HDFS for tests: a MiniDFSCluster (NameNode and one
// DataNode in one JVM, from hadoop-client-minicluster on Maven Central, installed and
// cached by scripts/hdfs-peer) on free loopback ports, with its data in a temporary
// directory. A cluster is stopped by its pid when the test (or the test binary, for the
// shared one) ends, and killed with the test binary if that dies first.
//
// Run, Kill and StartAgain serve programs that are not tests (the HDFS benchmarks of
// package bench): the same JVM, started and stopped by pid, without a testing.TB.
//
// Java 17 and Maven are needed. Without them a test that asks for HDFS fails and says so,
// unless SLUICE_SKIP_HDFS=1 is set, which skips it saying why: `make test` (and CI) never
// sets it. SLUICE_HDFS_HOME names an install directory from scripts/hdfs-peer (the
// Makefile passes it); without it the package runs the script itself.
package hdfstest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sluice/internal/peer"
)

// readyTimeout bounds a cluster's start: 3-7 s on a quiet machine, 11-34 s while other
// work holds both cores (peers README); CI runs test packages in parallel.
const readyTimeout = 3 * time.Minute

// Cluster is a running MiniDFSCluster.
type Cluster struct {
	// Addr is the NameNode's RPC address, 127.0.0.1:port.
	Addr string
	port int
	dir  string // its directories and its log
	home string
	mu   sync.Mutex
	cmd  *exec.Cmd // nil while stopped
}

// home returns the HDFS install directory, installing it the first time if needed.
func home() (string, error) { return peer.Install("hdfs-peer", "SLUICE_HDFS_HOME") }

// Start starts a cluster for t and stops it when t ends.
func Start(t testing.TB) *Cluster {
	t.Helper()
	c, err := Run(t.TempDir())
	if err != nil {
		fail(t, err)
	}
	t.Cleanup(c.Stop)
	return c
}

func fail(t testing.TB, err error) {
	t.Helper()
	peer.Fail(t, "SLUICE_SKIP_HDFS", err)
}

var shared struct {
	once sync.Once
	c    *Cluster
	err  error
	dir  string
}

// Shared returns the test binary's shared cluster, started by the first caller. Tests
// that share it use directories of their own; Main stops it.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "sluice-hdfs-")
		if shared.err == nil {
			shared.c, shared.err = Run(shared.dir)
		}
	})
	if shared.err != nil {
		fail(t, shared.err)
	}
	return shared.c
}

// Main runs the tests and then stops the shared cluster, if one was started: a test
// package that calls Shared has `func TestMain(m *testing.M) { hdfstest.Main(m) }`.
func Main(m *testing.M) {
	code := m.Run()
	if shared.c != nil {
		shared.c.Stop()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// Run formats and starts a cluster whose data and log live in dir, and waits until it is
// ready (NameNode out of safe mode, its DataNode registered). The caller stops it (Stop
// or Kill); it dies with the calling process.
func Run(dir string) (*Cluster, error) {
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	h, err := home()
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, home: h}
	if err := c.run(true); err != nil {
		return nil, err
	}
	return c, nil
}

// checkDir refuses a directory HDFS would misread: Hadoop takes its directory settings
// as comma-separated lists, so a comma (a test or benchmark named "a,b") splits the path
// and HDFS writes below the working directory and never starts.
func checkDir(dir string) error {
	if strings.ContainsRune(dir, ',') {
		return fmt.Errorf("cannot run HDFS in %s: Hadoop splits directory settings at commas", dir)
	}
	return nil
}

// run starts the JVM, formatting the cluster's directories the first time, and waits
// until the NameNode is out of safe mode with its DataNode registered.
func (c *Cluster) run(format bool) error {
	cp, err := os.ReadFile(filepath.Join(c.home, "classpath"))
	if err != nil {
		return fmt.Errorf("HDFS install %s: %w", c.home, err)
	}
	tmp := filepath.Join(c.dir, "tmp")
	ready := filepath.Join(c.dir, "ready.json")
	os.Remove(ready)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	args := []string{"-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.io.tmpdir=" + tmp,
		"-cp", strings.TrimSpace(string(cp)), "org.apache.hadoop.mapreduce.MiniHadoopClusterManager",
		"-nomr", "-nnport", fmt.Sprint(c.port), "-nnhttpport", "0", "-datanodes", "1",
		"-D", "hdfs.minidfs.basedir=" + filepath.Join(c.dir, "dfs"), "-D", "dfs.permissions.enabled=false",
		"-writeDetails", ready}
	if format {
		args = append(args, "-format")
	}
	p, err := peer.Java(c.dir, "log", args...)
	if err != nil {
		return fmt.Errorf("cannot start HDFS: %w", err)
	}
	cmd, exited := p.Cmd, p.Exited
	deadline := time.After(readyTimeout)
	for {
		if b, err := os.ReadFile(ready); err == nil && len(b) > 0 {
			var d struct {
				Port int `json:"namenode_port"`
			}
			if err := json.Unmarshal(b, &d); err == nil && d.Port > 0 {
				c.port, c.Addr = d.Port, fmt.Sprintf("127.0.0.1:%d", d.Port)
				break
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("HDFS exited before it was ready (%v); log in %s:\n%s", cmd.ProcessState, c.dir, tail(c.dir))
		case <-deadline:
			p.Stop()
			return fmt.Errorf("HDFS not ready after %v; log in %s:\n%s", readyTimeout, c.dir, tail(c.dir))
		case <-time.After(50 * time.Millisecond):
		}
	}
	c.mu.Lock()
	c.cmd = cmd
	c.mu.Unlock()
	go func() {
		<-exited
		c.mu.Lock()
		if c.cmd == cmd {
			c.cmd = nil
		}
		c.mu.Unlock()
	}()
	return nil
}

// tail returns the end of the cluster's log.
func tail(dir string) string { return peer.Tail(dir, "log") }

// Stop stops the cluster (SIGTERM, by pid) and waits for it to exit. Its data stays
// until the test's directory is removed; Restart starts it again on it.
func (c *Cluster) Stop() {
	c.signal(syscall.SIGTERM, true)
}

// Kill kills the cluster with SIGKILL, as a crash would, and waits for it to exit.
func (c *Cluster) Kill() {
	c.signal(syscall.SIGKILL, true)
}

// Pause stops the cluster's JVM with SIGSTOP: calls to it hang until Resume.
func (c *Cluster) Pause() { c.signal(syscall.SIGSTOP, false) }

// Resume continues a paused cluster (SIGCONT).
func (c *Cluster) Resume() { c.signal(syscall.SIGCONT, false) }

func (c *Cluster) signal(sig syscall.Signal, wait bool) {
	c.mu.Lock()
	cmd := c.cmd
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	if sig == syscall.SIGTERM || sig == syscall.SIGKILL {
		cmd.Process.Signal(syscall.SIGCONT) // a paused JVM does not handle SIGTERM
	}
	cmd.Process.Signal(sig)
	if !wait {
		return
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		c.mu.Lock()
		gone := c.cmd != cmd
		c.mu.Unlock()
		if gone {
			return
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			deadline = time.Now().Add(time.Minute)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Restart starts a stopped or killed cluster again on its data, at the same address.
func (c *Cluster) Restart(t testing.TB) {
	t.Helper()
	if err := c.StartAgain(); err != nil {
		t.Fatal(err)
	}
}

// StartAgain starts a stopped or killed cluster again on its data, at the same address,
// and waits until it is ready.
func (c *Cluster) StartAgain() error { return c.run(false) }

// Pid returns the cluster JVM's process id, 0 while it is stopped.
func (c *Cluster) Pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return 0
	}
	return c.cmd.Process.Pid
}
