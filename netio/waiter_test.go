package netio

import (
	"bufio"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"sluice/wire"
)

// waiterHandler answers every request at once and counts its handles, and what each
// BeforeWait saw.
type waiterHandler struct {
	handled, waits, seen *atomic.Int64
}

func (waiterHandler) Serving(string) {}

func (h waiterHandler) Handle(c *Conn, sl Slot, req *wire.Request) {
	h.handled.Add(1)
	c.Respond(sl, emptyAnswer(req.Header.RequestID))
}

func (h waiterHandler) BeforeWait() {
	h.waits.Add(1)
	h.seen.Store(h.handled.Load())
}

// TestBeforeWaitAfterEachCallback: a Waiter's BeforeWait runs after the readable events
// that handed requests to the handler (it sees every request handled) and after a close.
func TestBeforeWaitAfterEachCallback(t *testing.T) {
	h := waiterHandler{new(atomic.Int64), new(atomic.Int64), new(atomic.Int64)}
	s := startServer(t, Config{}, h)
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	if _, err := c.Write(produceStream(n)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(c)
	for range n {
		if _, err := readAnswer(r); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for h.seen.Load() != n {
		if time.Now().After(deadline) {
			t.Fatalf("BeforeWait saw %d requests handled, want %d", h.seen.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
	before := h.waits.Load()
	c.Close()
	for h.waits.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("no BeforeWait after the connection closed")
		}
		time.Sleep(time.Millisecond)
	}
}
