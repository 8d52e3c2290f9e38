package zktest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice/internal/peer"
)

// TestPortTaken starts a real ZooKeeper whose first port is held by another listener, as
// when a parallel test takes it between the pick and the bind: the server fails to bind,
// is started again on another port, and serves.
func TestPortTaken(t *testing.T) {
	held := peer.HeldPort(t)
	home, err := peer.Install("zk-peer", "SLUICE_ZK_HOME")
	if err != nil {
		peer.Fail(t, "SLUICE_SKIP_ZK", err)
	}
	cp, err := os.ReadFile(filepath.Join(home, "classpath"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := run(dir, strings.TrimSpace(string(cp)), held)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	peer.CheckMovedOff(t, s.Addr, held, filepath.Join(dir, "log-bind-1"))
	if !s.serving() {
		t.Fatalf("ZooKeeper at %s does not serve", s.Addr)
	}
}
