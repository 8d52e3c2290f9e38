package testbroker

import (
	"net"
	"strings"
	"testing"
)

// TestStartOnATakenPort runs a real broker on a port another listener holds, as when a
// parallel test binds it between the pick and the broker's bind: the first start reports
// the taken port (so that Start picks another) instead of failing the test, and the
// broker Start then returns serves on a port of its own that Restart keeps.
func TestStartOnATakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b := &Broker{t: t, Dir: t.TempDir()}
	if b.start(ln.Addr().String(), true) {
		b.Stop()
		t.Fatalf("a broker started on %s, which a listener holds", ln.Addr())
	}
	if !strings.Contains(b.Log(), "address already in use") {
		t.Fatalf("the broker's log does not say why it stopped:\n%s", b.Log())
	}

	b = Start(t, b.Dir)
	if b.Addr == ln.Addr().String() {
		t.Fatalf("Start gave the held address %s", b.Addr)
	}
	first := b.Addr
	b.Kill()
	b.Restart()
	if b.Addr != first {
		t.Fatalf("Restart moved the broker from %s to %s", first, b.Addr)
	}
	c, err := net.Dial("tcp", b.Addr)
	if err != nil {
		t.Fatalf("the restarted broker does not accept at %s: %v", b.Addr, err)
	}
	c.Close()
}
