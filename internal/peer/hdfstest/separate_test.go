package hdfstest

import (
	"path/filepath"
	"testing"
	"time"

	"sluice/internal/peer"
	"sluice/persist/hdfs"
)

// TestNameNodePortTaken starts a real cluster whose NameNode's first port is held by
// another listener, as when a parallel test takes it between the pick and the bind: the
// NameNode fails to bind, is started again on another port, and the cluster takes writes.
func TestNameNodePortTaken(t *testing.T) {
	held := peer.HeldPort(t)
	dir := t.TempDir()
	s, err := runSeparate(dir, 1, func(addr string) error { return hdfs.Probe(addr, 5*time.Second) }, nil, held)
	if err != nil {
		fail(t, err)
	}
	defer s.Stop()
	peer.CheckMovedOff(t, s.Addr, held, filepath.Join(dir, "nn-bind-1.log"))
	if err := hdfs.Probe(s.Addr, 5*time.Second); err != nil {
		t.Fatalf("the cluster at %s takes no writes: %v", s.Addr, err)
	}
}
