package zktest

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"sluice/internal/peer"
)

// TestPortTaken starts a real ZooKeeper whose first port is held by another listener, as
// when a parallel test takes it between the pick and the bind: the server fails to bind,
// is started again on another port, and serves.
func TestPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	home, err := peer.Install("zk-peer", "SLUICE_ZK_HOME")
	if err != nil {
		peer.Fail(t, "SLUICE_SKIP_ZK", err)
	}
	cp, err := os.ReadFile(filepath.Join(home, "classpath"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := run(dir, strings.TrimSpace(string(cp)), taken)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	if strings.HasSuffix(s.Addr, ":"+strconv.Itoa(taken)) {
		t.Fatalf("ZooKeeper is at %s, the taken port", s.Addr)
	}
	b, err := os.ReadFile(filepath.Join(dir, "log-bind-1"))
	if err != nil || !strings.Contains(string(b), "java.net.BindException") {
		t.Fatalf("the first server's log (%v) does not show the failed bind", err)
	}
	if !s.serving() {
		t.Fatalf("ZooKeeper at %s does not serve", s.Addr)
	}
}
