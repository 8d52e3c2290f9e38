// Package zktest runs a real ZooKeeper for tests: a standalone server
// (org.apache.zookeeper:zookeeper from Maven Central, installed and cached by
// scripts/zk-peer) bound to 127.0.0.1 on a free port, with its data in the test's
// directory, stopped by its pid when the test ends (and killed with the test binary).
//
// Java 17 and Maven are needed: without them a test that asks for ZooKeeper fails and
// says so, unless SLUICE_SKIP_ZK=1 is set, which skips it saying why (`make test` and CI
// never set it). SLUICE_ZK_HOME names an install from scripts/zk-peer.
package zktest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"sluice/internal/peer"
	"sluice/internal/spawn"
)

// readyTimeout bounds a start: 0.3-0.4 s on a quiet machine (peers README), far longer
// while the suite's other JVMs hold the cores.
const readyTimeout = 2 * time.Minute

// Server is a running standalone ZooKeeper.
type Server struct {
	Addr string // 127.0.0.1:port
	dir  string
	cp   string
	proc *peer.Proc
}

// Start starts a server for t (tickTime 500 ms, so sessions may be as short as 1 s) and
// stops it when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := Run(t.TempDir())
	if err != nil {
		if errors.Is(err, errInstall) {
			peer.Fail(t, "SLUICE_SKIP_ZK", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// errInstall is a ZooKeeper that cannot be installed here (no Java or Maven).
var errInstall = errors.New("cannot install ZooKeeper")

// Run starts a server (as Start does) with its data and log in dir, for programs that
// are not tests (`sluice chaos --distributed`). The caller stops it (Stop or Kill); it
// dies with the calling process.
func Run(dir string) (*Server, error) {
	home, err := peer.Install("zk-peer", "SLUICE_ZK_HOME")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errInstall, err)
	}
	cp, err := os.ReadFile(filepath.Join(home, "classpath"))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errInstall, err)
	}
	return run(dir, strings.TrimSpace(string(cp)), 0)
}

// run starts the server; port, when not 0, is the first port to try (a test gives a
// taken one). The port is taken free, then bound by a JVM a moment later; in between,
// another process asking for the same number can take it (the NameNode met that,
// hdfstest, when ports came from the ephemeral range). Before the first start the port is still ours to choose: a server that
// could not bind is started again on another, at most bindAttempts times (restarts keep
// the port, which it held till then).
func run(dir, cp string, port int) (*Server, error) {
	for attempt := 1; ; attempt++ {
		if port == 0 {
			var err error
			if port, err = peer.FreePort(); err != nil {
				return nil, err
			}
		}
		s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dir, cp: cp}
		cfg := fmt.Sprintf("tickTime=500\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n"+
			"admin.enableServer=false\n4lw.commands.whitelist=ruok,srvr,stat,mntr\nforceSync=no\n",
			filepath.Join(s.dir, "data"), port)
		if err := os.WriteFile(filepath.Join(s.dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
			return nil, err
		}
		err := s.StartAgain()
		if err == nil {
			return s, nil
		}
		if attempt == bindAttempts || !peer.BindFailed(filepath.Join(dir, "log")) {
			return nil, err
		}
		if err := os.Rename(filepath.Join(dir, "log"), filepath.Join(dir, fmt.Sprintf("log-bind-%d", attempt))); err != nil {
			return nil, err
		}
		port = 0
	}
}

// bindAttempts bounds the first starts of a server whose port was taken meanwhile.
const bindAttempts = 3

// Restart starts the server (again, on its data) and waits until it serves.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.StartAgain(); err != nil {
		t.Fatal(err)
	}
}

// StartAgain starts the server (again, on its data and port) and waits until it
// serves.
func (s *Server) StartAgain() error {
	p, err := peer.Java(s.dir, "log", "-Xms32m", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		"-cp", s.cp, "org.apache.zookeeper.server.ZooKeeperServerMain", filepath.Join(s.dir, "zoo.cfg"))
	if err != nil {
		return err
	}
	s.proc = p
	deadline := time.Now().Add(readyTimeout)
	for !s.serving() {
		select {
		case <-p.Exited:
			return fmt.Errorf("ZooKeeper exited before it served (%v):\n%s", p.Cmd.ProcessState, peer.Tail(s.dir, "log"))
		default:
		}
		if time.Now().After(deadline) {
			p.Kill()
			return fmt.Errorf("ZooKeeper not serving after %v:\n%s", readyTimeout, peer.Tail(s.dir, "log"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// Create creates a persistent znode with the given content, for a test that edits the
// cluster state by hand. It runs a few lines of Java against the server's own client
// classes (the CLI needs jars the install does not have); a failure fails t.
func (s *Server) Create(t testing.TB, path, data string) {
	t.Helper()
	s.edit(t, "create", path, data)
}

// Delete deletes a znode (whatever its version), as Create makes one: for a test that
// takes cluster state away by hand.
func (s *Server) Delete(t testing.TB, path string) {
	t.Helper()
	s.edit(t, "delete", path)
}

// edit runs zkCreate with PATH [DATA]; what names it in a failure.
func (s *Server) edit(t testing.TB, what, path string, data ...string) {
	t.Helper()
	src := filepath.Join(t.TempDir(), "ZkCreate.java")
	if err := os.WriteFile(src, []byte(zkCreate), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-Xmx64m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", s.cp, src, s.Addr, path}, data...)
	cmd := exec.Command("java", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := spawn.Run(cmd); err != nil { // dies with the test binary
		t.Fatalf("cannot %s znode %s: %v\n%s", what, path, err, out.Bytes())
	}
}

// zkCreate is Create's program: ADDR PATH DATA; without DATA it deletes PATH (Delete).
const zkCreate = `import org.apache.zookeeper.*;
import java.util.concurrent.CountDownLatch;

public class ZkCreate {
	public static void main(String[] a) throws Exception {
		CountDownLatch up = new CountDownLatch(1);
		ZooKeeper zk = new ZooKeeper(a[0], 10000, e -> {
			if (e.getState() == Watcher.Event.KeeperState.SyncConnected) up.countDown();
		});
		up.await();
		if (a.length == 2) zk.delete(a[1], -1);
		else zk.create(a[1], a[2].getBytes("UTF-8"), ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
		zk.close();
	}
}
`

// serving asks the server "srvr" (a four-letter command) and looks for its mode.
func (s *Server) serving() bool {
	c, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return false
	}
	buf := make([]byte, 4096)
	n, _ := c.Read(buf)
	return strings.Contains(string(buf[:n]), "Mode: standalone")
}

// Stop stops the server (SIGTERM by pid) and waits for it.
func (s *Server) Stop() {
	if s.proc != nil {
		s.proc.Stop()
		s.proc = nil
	}
}

// Kill kills the server (SIGKILL) and waits for it.
func (s *Server) Kill() {
	if s.proc != nil {
		s.proc.Kill()
		s.proc = nil
	}
}

// Pause stops the server with SIGSTOP; Resume continues it.
func (s *Server) Pause() { s.proc.Cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() { s.proc.Cmd.Process.Signal(syscall.SIGCONT) }

// Pid returns the server's process id, 0 while it is stopped.
func (s *Server) Pid() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.Cmd.Process.Pid
}
