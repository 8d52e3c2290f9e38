package admin

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"sluice/internal/peer/zktest"
)

// TestHandshakeDeadlineCapped: a deadline further ahead than the session (go-zookeeper's
// ten receive timeouts for the handshake) is cut to a third of the session; the receive
// timeout itself, and no deadline, are left alone. The session is the granted one once
// known: a receive timeout of a session granted above the one asked is left alone too.
func TestHandshakeDeadlineCapped(t *testing.T) {
	f := func(session time.Duration) {
		t.Helper()
		c := &cappedConn{session: func() time.Duration { return session }}
		now := time.Now()
		if got := c.cap(time.Time{}); !got.IsZero() {
			t.Fatalf("no deadline became %v", got)
		}
		if d := now.Add(session * 2 / 3); !c.cap(d).Equal(d) {
			t.Fatalf("session %v: a receive timeout's deadline was moved to %v", session, c.cap(d).Sub(now))
		}
		if got := c.cap(now.Add(10 * session * 2 / 3)).Sub(now); got < session/3 || got > session/3+time.Second {
			t.Fatalf("session %v: the handshake's deadline is %v from now, want about %v", session, got, session/3)
		}
	}
	f(9 * time.Second)
	f(4 * time.Second) // granted for 2 s asked, with ZooKeeper's default tickTime
}

// TestDialerGrantedAboveAsked: a session asked shorter than the server's
// minSessionTimeout (zktest's is 1 s) is granted that minimum, and go-zookeeper's
// receive timeout follows the granted one: the connection must hold. With the deadlines
// cut from the asked timeout it was dropped 200 ms after every connect, idle between
// two pings, and connected again a second later. The test watches one connection for
// nine ping intervals.
func TestDialerGrantedAboveAsked(t *testing.T) {
	s := zktest.Start(t)
	var log lockedBuf
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, []string{s.Addr}, "/sluice", 600*time.Millisecond,
		slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.SessionTimeout(); got != time.Second {
		t.Fatalf("granted %v, want zktest's minimum 1s", got)
	}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if n := strings.Count(log.String(), "connected to"); n != 1 {
			t.Fatalf("%d connections to ZooKeeper, want 1 (log:\n%s)", n, log.String())
		}
	}
}
