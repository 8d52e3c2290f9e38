package loopport

import (
	"net"
	"strconv"
	"testing"
)

// TestFreeIsBelowTheEphemeralRange: on a kernel whose ephemeral range starts high enough
// (Linux's default starts at 32768), every port Free gives is below it and binds.
func TestFreeIsBelowTheEphemeralRange(t *testing.T) {
	lo, err := ephemeralLow()
	if err != nil {
		t.Fatalf("this test needs %s: %v", rangeFile, err)
	}
	if lo <= lowest+1000 { // Free falls back to the ephemeral range there, as documented
		t.Skipf("the ephemeral range starts at %d, not above %d: Free picks from it", lo, lowest+1000)
	}
	seen := map[int]bool{}
	for range 50 {
		port, err := Free()
		if err != nil {
			t.Fatal(err)
		}
		if port < lowest || port >= lo {
			t.Fatalf("port %d is outside [%d, %d)", port, lowest, lo)
		}
		seen[port] = true
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("port %d does not bind: %v", port, err)
		}
		ln.Close()
	}
	if len(seen) < 40 {
		t.Fatalf("50 picks gave only %d ports: the picks are not spread", len(seen))
	}
}

// TestATakenPortIsNotFree: a port held by a listener is not taken for free.
func TestATakenPortIsNotFree(t *testing.T) {
	port, err := Free()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if free(port) {
		t.Fatalf("port %d is held, yet free says it binds", port)
	}
}
