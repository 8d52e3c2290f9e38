package netio

import (
	"net"
	"testing"
	"time"

	"sluice/wire"
)

// releaseFunc is a Releaser.
type releaseFunc func()

func (f releaseFunc) Release() { f() }

// lateParkHandler parks requests below parkBelow from another goroutine after a delay
// (a long poll whose park pass ends after the loop moved on), answering each when it
// is released; other requests are answered at once. parked gets each Park's request id
// once Park returned.
type lateParkHandler struct {
	parkBelow uint32
	delay     time.Duration
	before    chan struct{} // closed: park (nil: at once after delay)
	parked    chan uint32   // each parked request's id, once Park returned
	released  chan uint32   // each released request's id
}

func (lateParkHandler) Serving(string) {}

func (h lateParkHandler) Handle(c *Conn, sl Slot, req *wire.Request) {
	id := req.Header.RequestID
	if id >= h.parkBelow {
		c.Respond(sl, emptyAnswer(id))
		return
	}
	go func() {
		if h.before != nil {
			<-h.before
		}
		time.Sleep(h.delay)
		c.Park(sl, releaseFunc(func() {
			h.released <- id
			c.Respond(sl, emptyAnswer(id))
		}))
		h.parked <- id
	}()
}

// TestParkWhilePaused: two long polls take a connection's MaxInflight of 2 and park only
// after the loop paused the connection at the third request (their park passes end
// later). The pause released the polls parked when it began, none then; Park now
// releases a poll parked into a pause at once, so the third request is answered without
// waiting out the polls (whose owner here would never answer them otherwise: a max wait
// of a minute, in a broker).
func TestParkWhilePaused(t *testing.T) {
	h := lateParkHandler{parkBelow: 2, delay: 200 * time.Millisecond, parked: make(chan uint32, 2), released: make(chan uint32, 2)}
	askN(t, startServer(t, Config{MaxInflight: 2}, h), 3) // a poll parked into the pause held the connection
}

// TestParkOnClosedConnection: a poll parked after its connection closed is released at
// once. Nothing else would release it (the close released the polls parked then), and
// its owner would hold its partitions' waiters and its memory for its whole max wait.
func TestParkOnClosedConnection(t *testing.T) {
	closed := make(chan struct{})
	h := lateParkHandler{parkBelow: 1, delay: 200 * time.Millisecond, before: closed,
		parked: make(chan uint32, 1), released: make(chan uint32, 1)}
	s := startServer(t, Config{}, h)
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(produceStream(1)); err != nil {
		t.Fatal(err)
	}
	// Park 200 ms after the client closed: the loop has seen the close by then, on
	// loopback (were it not, the close would release the poll: the test passes either
	// way once Park releases on a closed connection, and fails only without that).
	c.Close()
	close(closed)
	select {
	case <-h.parked:
	case <-time.After(20 * time.Second):
		t.Fatal("Park did not return")
	}
	select {
	case <-h.released:
	case <-time.After(20 * time.Second):
		t.Fatal("a poll parked on a closed connection was never released")
	}
}
