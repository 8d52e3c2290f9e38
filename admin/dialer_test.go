package admin

import (
	"testing"
	"time"
)

// TestHandshakeDeadlineCapped: a deadline further ahead than an established
// connection's (go-zookeeper's ten receive timeouts for the handshake) is cut to a third
// of the session; the receive timeout itself, and no deadline, are left alone.
func TestHandshakeDeadlineCapped(t *testing.T) {
	const session = 9 * time.Second
	c := &cappedConn{normal: session * 2 / 3, handshake: session / 3}
	now := time.Now()
	if got := c.cap(time.Time{}); !got.IsZero() {
		t.Fatalf("no deadline became %v", got)
	}
	if d := now.Add(session * 2 / 3); !c.cap(d).Equal(d) {
		t.Fatalf("a receive timeout's deadline was moved to %v", c.cap(d).Sub(now))
	}
	if got := c.cap(now.Add(10 * session * 2 / 3)).Sub(now); got < session/3 || got > session/3+time.Second {
		t.Fatalf("the handshake's deadline is %v from now, want about %v", got, session/3)
	}
}
