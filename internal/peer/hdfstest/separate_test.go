package hdfstest

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sluice/persist/hdfs"
)

// TestNameNodePortTaken starts a real cluster whose NameNode's first port is held by
// another listener, as when a parallel test takes it between the pick and the bind: the
// NameNode fails to bind, is started again on another port, and the cluster takes writes.
func TestNameNodePortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().(*net.TCPAddr).Port
	dir := t.TempDir()
	s, err := runSeparate(dir, 1, func(addr string) error { return hdfs.Probe(addr, 5*time.Second) }, nil, taken)
	if err != nil {
		fail(t, err)
	}
	defer s.Stop()
	if strings.HasSuffix(s.Addr, ":"+strconv.Itoa(taken)) {
		t.Fatalf("the NameNode is at %s, the taken port", s.Addr)
	}
	b, err := os.ReadFile(filepath.Join(dir, "nn-bind-1.log"))
	if err != nil || !strings.Contains(string(b), "java.net.BindException") {
		t.Fatalf("the first NameNode's log (%v) does not show the failed bind", err)
	}
	if err := hdfs.Probe(s.Addr, 5*time.Second); err != nil {
		t.Fatalf("the cluster at %s takes no writes: %v", s.Addr, err)
	}
}
