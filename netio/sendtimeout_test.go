package netio

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSendTimeoutClosesAStalledReader: a client that sends requests and never reads
// their answers fills its socket; once the socket has taken nothing for SendTimeout the
// server closes the connection, every answer's Done runs once (what the answers held is
// released: arena chunks and deleted segments' files, in a broker), and the outbound
// budget settles. Without the timeout the connection and its answers would stay as long
// as the client kept it open.
func TestSendTimeoutClosesAStalledReader(t *testing.T) {
	var answered sync.WaitGroup
	answered.Add(1) // held until the answers are read (mixedHandler.answered)
	var given, done atomic.Int64
	h := mixedHandler{large: 200 << 10, offLoop: true, answered: &answered, given: &given, done: &done}
	s := startServer(t, Config{MaxInflight: 512, SendTimeout: 300 * time.Millisecond}, h)
	const n = 300
	stalled := dialStream(t, s, n)
	waitFor(t, "the stalled reader's connection to be closed for its send timeout",
		func() bool { return s.Stats().SendsTimedOut > 0 })
	st := settled(t, s)
	answered.Done()
	answered.Wait()
	if st.SendsTimedOut != 1 {
		t.Fatalf("%d connections closed for their send timeout, want 1", st.SendsTimedOut)
	}
	if g, d := given.Load(), done.Load(); g != n || d != n {
		t.Fatalf("%d answers given, %d Done calls: want %d each (a dropped answer releases what it holds too)", g, d, n)
	}
	if st := s.Stats(); st.OutboundQueued != 0 || st.OutboundReserved != 0 {
		t.Fatalf("outbound budget still charged after the close: %d queued, %d reserved", st.OutboundQueued, st.OutboundReserved)
	}
	// The client finds its connection closed by the server: what the socket held, then
	// the end, not a read that waits.
	stalled.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.Copy(io.Discard, stalled); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the server did not close the stalled reader's connection")
	}
}

// TestSendTimeoutSparesASlowReader: the timeout runs from the last time the socket took
// bytes: a client that reads steadily but slowly, 2 KiB every 5 ms (400 KB/s), for eight
// times the timeout (then at full speed, to finish), gets every answer whole and in order. Its socket is full
// throughout, and never reported writable for longer than the timeout (Linux waits for
// a third of the send buffer, megabytes, to be free): a deadline on that wait alone
// closed this reader after half a second (found by review).
func TestSendTimeoutSparesASlowReader(t *testing.T) {
	var answered sync.WaitGroup
	answered.Add(1) // held until the answers are read (mixedHandler.answered)
	var given, done atomic.Int64
	h := mixedHandler{large: 200 << 10, offLoop: true, answered: &answered, given: &given, done: &done}
	const timeout = 500 * time.Millisecond
	s := startServer(t, Config{MaxInflight: 1024, SendTimeout: timeout}, h)
	const n = 300 // about 9 MB of answers: more than loopback's socket buffers hold
	c := dialStream(t, s, n)
	start := time.Now()
	h.readAnswers(t, slowReader{c, 2 << 10, 5 * time.Millisecond, start.Add(8 * timeout)}, n)
	took := time.Since(start)
	c.Close()
	answered.Done()
	answered.Wait()
	st := settled(t, s)
	if st.SendsTimedOut != 0 {
		t.Fatalf("a reader that kept reading was closed for its send timeout (%d)", st.SendsTimedOut)
	}
	if st.WriteWaits == 0 || took < 8*timeout {
		t.Fatalf("the reader took %v and the socket was full %d times: the test wants it full while it reads slowly",
			took, st.WriteWaits)
	}
	if given.Load() != n || done.Load() != n {
		t.Fatalf("%d answers given, %d Done calls; want %d each", given.Load(), done.Load(), n)
	}
}

// slowReader reads at most chunk bytes per read, and sleeps pause before each, until
// slowUntil; then at full speed.
type slowReader struct {
	net.Conn
	chunk     int
	pause     time.Duration
	slowUntil time.Time
}

func (r slowReader) Read(p []byte) (int, error) {
	if time.Now().After(r.slowUntil) {
		return r.Conn.Read(p)
	}
	time.Sleep(r.pause)
	return r.Conn.Read(p[:min(len(p), r.chunk)])
}
