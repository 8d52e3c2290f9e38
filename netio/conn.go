package netio

import (
	"os"
	"sync"
	"sync/atomic"

	"github.com/panjf2000/gnet/v2"
)

// Response is what a handler answers: Head (the frame up to and including whatever fixed
// fields it has), then Iov (for example arena chunks holding batches), then Len bytes of
// File from Pos (a segment region, sent with sendfile; File is -1 when none). Done, if
// not nil, runs on the loop once everything was written or the connection closed: it
// releases the chunks or the region.
type Response struct {
	Head []byte
	Iov  [][]byte
	File int
	Pos  int64
	Len  int64
	Done func()
	// Close asks netio to close the connection once this response is written (fatal
	// protocol errors).
	Close bool
}

// slot is one request's place in its connection's response queue.
type slot struct {
	resp  Response
	ready bool
}

// Conn is the broker's state for one connection. Respond is safe from any goroutine;
// everything else runs on the connection's loop.
type Conn struct {
	gc  gnet.Conn
	srv *Server

	mu struct {
		sync.Mutex
		queue  []*slot // in request order; the head is being written
		closed bool
	}
	wakePending atomic.Bool

	// Loop-only writer state.
	iov       [][]byte // what remains of the head response's bytes
	fileSent  int64    // bytes of the head response's file region already sent
	started   bool     // the head response's iov was loaded
	waiting   atomic.Bool
	dup       *os.File // dup of the socket for writability waits, made on first need
	closeNext bool     // close after the queue drains (fatal error answered)
}

// Slot identifies a request's place in the response order; pass it to Respond.
type Slot struct{ s *slot }

// newSlot appends a slot for a request just read. Loop only.
func (c *Conn) newSlot() Slot {
	s := &slot{}
	c.mu.Lock()
	c.mu.queue = append(c.mu.queue, s)
	c.mu.Unlock()
	return Slot{s}
}

// inflight returns the number of requests not yet fully answered. Loop only.
func (c *Conn) inflight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.queue)
}

// Respond fills a request's slot with its response and wakes the loop to write it. Safe
// from any goroutine, exactly once per slot. After the connection closed it just runs
// resp.Done.
func (c *Conn) Respond(sl Slot, resp Response) {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		if resp.Done != nil {
			resp.Done()
		}
		return
	}
	sl.s.resp, sl.s.ready = resp, true
	head := len(c.mu.queue) > 0 && c.mu.queue[0] == sl.s
	c.mu.Unlock()
	if head {
		c.wake()
	}
}

// wake schedules OnTraffic on the loop, at most once until it runs.
func (c *Conn) wake() {
	if c.wakePending.CompareAndSwap(false, true) {
		if err := c.gc.Wake(nil); err != nil {
			c.wakePending.Store(false)
		}
	}
}

// RemoteAddr returns the client's address.
func (c *Conn) RemoteAddr() string { return c.gc.RemoteAddr().String() }

// closeLocked marks the connection closed and returns the responses to release.
func (c *Conn) shutdown() {
	c.mu.Lock()
	c.mu.closed = true
	queue := c.mu.queue
	c.mu.queue = nil
	c.mu.Unlock()
	for _, s := range queue {
		if s.ready && s.resp.Done != nil {
			s.resp.Done()
		}
	}
	if c.dup != nil {
		c.dup.Close() // also ends a pending writability wait
		c.dup = nil
	}
}
