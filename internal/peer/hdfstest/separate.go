package hdfstest

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"sluice/internal/peer"
)

// Separate is a NameNode and one or more DataNodes, each in a JVM of its own (the peers
// README's recipe), so that any of them can be killed and started again alone. The
// NameNode keeps its port across restarts; with n DataNodes, blocks are replicated n
// times (at most 3).
type Separate struct {
	Addr  string // the NameNode's RPC address
	dir   string
	home  string
	ready func(addr string) error
	nn    *peer.Proc
	dns   []*peer.Proc // nil while that DataNode is down
	props map[string]string
}

// StartSeparate formats and starts a NameNode and a DataNode for t and stops both when
// t ends. ready reports whether the cluster takes writes (the caller's HDFS client
// creates, writes and closes a small file): it is polled until it returns nil.
func StartSeparate(t testing.TB, ready func(addr string) error) *Separate {
	t.Helper()
	s, err := RunSeparate(t.TempDir(), ready)
	if err != nil {
		fail(t, err)
	}
	t.Cleanup(s.Stop)
	return s
}

// RunSeparate is StartSeparate for programs that are not tests (the chaos harness):
// the cluster's data and logs live in dir; the caller stops it (Stop), and it dies with
// the calling process.
func RunSeparate(dir string, ready func(addr string) error) (*Separate, error) {
	return RunSeparateN(dir, 1, ready)
}

// RunSeparateN is RunSeparate with n DataNodes (1 to 3), each in its own JVM, and every
// block replicated on all of them: a DataNode's crash is then a pipeline's loss, not an
// outage of the only copy.
func RunSeparateN(dir string, n int, ready func(addr string) error) (*Separate, error) {
	return runSeparate(dir, n, ready, nil, 0)
}

// StartSeparateN is StartSeparate with n DataNodes and props set in hdfs-site.xml over
// the harness's own settings (say a short dfs.namenode.heartbeat.recheck-interval, so
// that a stopped DataNode is declared dead within seconds).
func StartSeparateN(t testing.TB, n int, ready func(addr string) error, props map[string]string) *Separate {
	t.Helper()
	s, err := runSeparate(t.TempDir(), n, ready, props, 0)
	if err != nil {
		fail(t, err)
	}
	t.Cleanup(s.Stop)
	return s
}

// runSeparate starts the cluster; port, when not 0, is the NameNode's first port to try
// (a test gives a taken one).
func runSeparate(dir string, n int, ready func(addr string) error, props map[string]string, port int) (*Separate, error) {
	if n < 1 || n > 3 {
		return nil, fmt.Errorf("hdfstest: %d DataNodes: 1 to 3", n)
	}
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	h, err := home()
	if err != nil {
		return nil, err
	}
	if port == 0 {
		if port, err = peer.FreePort(); err != nil {
			return nil, err
		}
	}
	s := &Separate{Addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dir, home: h, ready: ready, dns: make([]*peer.Proc, n), props: props}
	if err := s.writeConf(); err != nil {
		return nil, err
	}
	format, err := s.java("format.log", "org.apache.hadoop.hdfs.server.namenode.NameNode", "-format", "-force", "-nonInteractive")
	if err != nil {
		return nil, err
	}
	select {
	case <-format.Exited:
	case <-time.After(readyTimeout):
		format.Stop()
		return nil, fmt.Errorf("formatting the NameNode took more than %v:\n%s", readyTimeout, peer.Tail(s.dir, "format.log"))
	}
	// The NameNode's port is taken free, then bound by a JVM a second or two later; in
	// between, another process can take it (make test met "BindException: Address already
	// in use" once, 2026-12-04, when ports still came from the ephemeral range; now only a
	// process asking for the same number can). Before the first
	// start the port is still ours to choose: a NameNode that could not bind is started
	// again on another (after a start, restarts keep the port, which it held till then).
	for attempt := 1; ; attempt++ {
		err := s.StartAgain()
		if err == nil {
			return s, nil
		}
		s.Stop()
		if attempt == bindAttempts || !peer.BindFailed(filepath.Join(s.dir, "nn.log")) {
			return nil, err
		}
		if err := os.Rename(filepath.Join(s.dir, "nn.log"), filepath.Join(s.dir, fmt.Sprintf("nn-bind-%d.log", attempt))); err != nil {
			return nil, err
		}
		if port, err = peer.FreePort(); err != nil {
			return nil, err
		}
		s.Addr = fmt.Sprintf("127.0.0.1:%d", port)
		if err := s.writeConf(); err != nil {
			return nil, err
		}
	}
}

// bindAttempts bounds the first starts of a NameNode whose port was taken meanwhile.
const bindAttempts = 3

// Stop kills every process (their data stays in the directory).
func (s *Separate) Stop() {
	s.KillDataNode()
	s.KillNameNode()
}

// Kill kills every process at once, as a crash of the host would.
func (s *Separate) Kill() { s.Stop() }

// DataNodes returns how many DataNodes the cluster has.
func (s *Separate) DataNodes() int { return len(s.dns) }

// StartAgain starts whichever process is not running, NameNode first, and waits until
// the cluster takes writes.
func (s *Separate) StartAgain() error {
	if s.nn == nil {
		if err := s.startNameNode(); err != nil {
			return err
		}
	}
	for i := range s.dns {
		if s.dns[i] == nil {
			if err := s.startDataNode(i); err != nil {
				return err
			}
		}
	}
	return s.waitReady()
}

// Pause stops every process with SIGSTOP: calls hang until Resume.
func (s *Separate) Pause() {
	signal(s.nn, syscall.SIGSTOP)
	for _, p := range s.dns {
		signal(p, syscall.SIGSTOP)
	}
}

// Resume continues every process (SIGCONT).
func (s *Separate) Resume() {
	for _, p := range s.dns {
		signal(p, syscall.SIGCONT)
	}
	signal(s.nn, syscall.SIGCONT)
}

// PauseNameNode stops the NameNode alone with SIGSTOP (ResumeNameNode continues it).
func (s *Separate) PauseNameNode() { signal(s.nn, syscall.SIGSTOP) }

// ResumeNameNode continues a paused NameNode.
func (s *Separate) ResumeNameNode() { signal(s.nn, syscall.SIGCONT) }

// PauseDataNode stops every DataNode with SIGSTOP, the NameNode running
// (ResumeDataNode continues them).
func (s *Separate) PauseDataNode() {
	for i := range s.dns {
		s.PauseDataNodeAt(i)
	}
}

// ResumeDataNode continues the paused DataNodes.
func (s *Separate) ResumeDataNode() {
	for i := range s.dns {
		s.ResumeDataNodeAt(i)
	}
}

// PauseDataNodeAt stops DataNode i alone with SIGSTOP.
func (s *Separate) PauseDataNodeAt(i int) { signal(s.dns[i], syscall.SIGSTOP) }

// ResumeDataNodeAt continues DataNode i.
func (s *Separate) ResumeDataNodeAt(i int) { signal(s.dns[i], syscall.SIGCONT) }

func signal(p *peer.Proc, sig syscall.Signal) {
	if p != nil {
		p.Cmd.Process.Signal(sig)
	}
}

// writeConf writes the cluster's core-site.xml and hdfs-site.xml: every port on
// loopback, the NameNode's fixed, the others ephemeral.
func (s *Separate) writeConf() error {
	conf := filepath.Join(s.dir, "conf")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		return err
	}
	prop := func(k, v string) string {
		return "<property><name>" + k + "</name><value>" + v + "</value></property>\n"
	}
	core := "<configuration>\n" + prop("fs.defaultFS", "hdfs://"+s.Addr) + prop("hadoop.tmp.dir", filepath.Join(s.dir, "tmp")) + "</configuration>\n"
	props := map[string]string{
		"dfs.namenode.name.dir":             "file://" + filepath.Join(s.dir, "name"),
		"dfs.datanode.data.dir":             "file://" + filepath.Join(s.dir, "data"),
		"dfs.namenode.rpc-address":          s.Addr,
		"dfs.namenode.http-address":         "127.0.0.1:0",
		"dfs.datanode.address":              "127.0.0.1:0",
		"dfs.datanode.http.address":         "127.0.0.1:0",
		"dfs.datanode.ipc.address":          "127.0.0.1:0",
		"dfs.replication":                   fmt.Sprint(len(s.dns)),
		"dfs.permissions.enabled":           "false",
		"dfs.namenode.safemode.extension":   "0",
		"dfs.heartbeat.interval":            "1",
		"dfs.namenode.lease-hard-limit-sec": "5",
	}
	maps.Copy(props, s.props)
	site := "<configuration>\n"
	for _, k := range slices.Sorted(maps.Keys(props)) {
		site += prop(k, props[k])
	}
	site += "</configuration>\n"
	if err := os.WriteFile(filepath.Join(conf, "core-site.xml"), []byte(core), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(conf, "hdfs-site.xml"), []byte(site), 0o644); err != nil {
		return err
	}
	logs, err := os.ReadFile(filepath.Join(s.home, "conf", "log4j.properties"))
	if err != nil {
		return err
	}
	// Lease and block recovery at INFO (a few lines per recovery): what a failed run's
	// NameNode and DataNode logs must show of a file cut back or kept.
	logs = append(logs, []byte(recoveryLogging)...)
	return os.WriteFile(filepath.Join(conf, "log4j.properties"), logs, 0o644)
}

// recoveryLogging raises the loggers of lease and block recovery to INFO (the
// harness's default is WARN): FSNamesystem says which lease it recovers and, in
// commitBlockSynchronization, the length and replicas a block was recovered to; the
// DataNodes' BlockRecoveryWorker what each replica was. The audit log stays off.
const recoveryLogging = `
log4j.logger.org.apache.hadoop.hdfs.server.namenode.FSNamesystem=INFO
log4j.logger.org.apache.hadoop.hdfs.server.namenode.FSNamesystem.audit=WARN
log4j.logger.org.apache.hadoop.hdfs.server.datanode.BlockRecoveryWorker=INFO
`

// java starts a JVM running main with the cluster's configuration first on the class
// path, logging to the named file in the cluster's directory.
func (s *Separate) java(logName, main string, args ...string) (*peer.Proc, error) {
	cp, err := os.ReadFile(filepath.Join(s.home, "classpath"))
	if err != nil {
		return nil, err
	}
	tmp := filepath.Join(s.dir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	return peer.Java(s.dir, logName, append([]string{"-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		"-Djava.io.tmpdir=" + tmp, "-cp", filepath.Join(s.dir, "conf") + ":" + strings.TrimSpace(string(cp)), main}, args...)...)
}

// StartNameNode starts the NameNode (again) on its data and waits until the cluster
// takes writes, when a DataNode runs.
func (s *Separate) StartNameNode(t testing.TB) {
	t.Helper()
	if err := s.startNameNode(); err != nil {
		t.Fatal(err)
	}
	if s.dns[0] != nil {
		if err := s.waitReady(); err != nil {
			t.Fatal(err)
		}
	}
}

// StartDataNode starts the DataNodes that are down (again) and waits until the cluster
// takes writes.
func (s *Separate) StartDataNode(t testing.TB) {
	t.Helper()
	for i := range s.dns {
		if s.dns[i] == nil {
			if err := s.startDataNode(i); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.waitReady(); err != nil {
		t.Fatal(err)
	}
}

func (s *Separate) startNameNode() error {
	p, err := s.java("nn.log", "org.apache.hadoop.hdfs.server.namenode.NameNode")
	if err != nil {
		return err
	}
	s.nn = p
	return nil
}

// startDataNode starts DataNode i: the first logs to dn.log and keeps its blocks in
// data (as with one DataNode), the others in dn-I.log and data-I.
func (s *Separate) startDataNode(i int) error {
	logName, data := "dn.log", "data"
	if i > 0 {
		logName, data = fmt.Sprintf("dn-%d.log", i), fmt.Sprintf("data-%d", i)
	}
	p, err := s.java(logName, "org.apache.hadoop.hdfs.server.datanode.DataNode",
		"-D", "dfs.datanode.data.dir=file://"+filepath.Join(s.dir, data))
	if err != nil {
		return err
	}
	s.dns[i] = p
	return nil
}

// waitReady polls ready until the cluster takes writes, one of the two exits, or
// readyTimeout passes.
func (s *Separate) waitReady() error {
	deadline := time.Now().Add(readyTimeout)
	for {
		err := s.ready(s.Addr)
		if err == nil {
			return nil
		}
		for _, p := range append([]*peer.Proc{s.nn}, s.dns...) {
			if p == nil {
				continue
			}
			select {
			case <-p.Exited:
				return fmt.Errorf("HDFS exited before it was ready (%v):\n%s\n%s", p.Cmd.ProcessState, peer.Tail(s.dir, "nn.log"), peer.Tail(s.dir, "dn.log"))
			default:
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("HDFS not ready after %v (%v):\n%s\n%s", readyTimeout, err, peer.Tail(s.dir, "nn.log"), peer.Tail(s.dir, "dn.log"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// KillNameNode kills the NameNode (SIGKILL) and waits for it to exit.
func (s *Separate) KillNameNode() { s.nn = kill(s.nn) }

// KillDataNode kills every DataNode (SIGKILL) and waits for them to exit.
func (s *Separate) KillDataNode() {
	for i := range s.dns {
		s.KillDataNodeAt(i)
	}
}

// KillDataNodeAt kills DataNode i (SIGKILL) and waits for it to exit.
func (s *Separate) KillDataNodeAt(i int) { s.dns[i] = kill(s.dns[i]) }

func kill(p *peer.Proc) *peer.Proc {
	if p != nil {
		p.Kill()
	}
	return nil
}
