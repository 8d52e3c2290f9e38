package netio

import (
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"sluice/wire"
)

// Response is what a handler answers: Head (the frame up to and including whatever fixed
// fields it has), then Iov (for example arena chunks holding batches), then Len bytes of
// File from Pos (a segment region, sent with sendfile; File is -1 when none). Done, if
// not nil, is called once everything was written or the connection closed, on the goroutine
// that wrote the last byte (the loop, or the one that answered: send.go), possibly
// before Respond returns: it releases the chunks or the region. More are further parts
// of the same answer, each written the same way after the one before it (a
// multi-partition fetch: a part header, then that partition's chunks or file region);
// Done covers them too.
type Response struct {
	Head []byte
	Iov  [][]byte
	File int
	Pos  int64
	Len  int64
	More []Part
	Done Doner
	// Close asks netio to close the connection once this response is written (fatal
	// protocol errors).
	Close bool
}

// Doner is told once that a Response was written, or dropped with its connection
// (Response.Done). An interface rather than a func, so that an answer's owner (a
// multi-partition fetch) can be told without the closure a method value allocates.
type Doner interface{ Done() }

// DoneFunc is a function as a Doner.
type DoneFunc func()

// Done calls f.
func (f DoneFunc) Done() { f() }

// slot is one request's place in its connection's response queue. Slots are reused: once
// written, a slot goes to its connection's free list (under Conn.mu) with gen advanced,
// so that a Slot handle kept past its answer (a second answer, as when a panic is answered
// after the handler had answered) no longer matches and is dropped instead of answering
// the request that reuses it. Without reuse a slot was an allocation per request, most of
// the broker's per-request garbage with the queue's own regrowth (newSlot).
type slot struct {
	gen     uint32 // under Conn.mu; a Slot with another gen is stale
	resp    Response
	ready   bool
	direct  bool     // the answer may be written off the loop (Response.direct), set with it
	release Releaser // set by Park while the request waits; cleared once called
	// The slot's charge to the outbound budget, under Conn.mu: reserved until it is
	// answered (a fetch's MaxBytes), then queued (the answer's Head and Iov bytes) until
	// it is written or the connection closes.
	reserved, queued int64
	// small holds the head of an answer given by RespondCopy, so that a small answer
	// (a produce's acknowledgment) needs no buffer of its own.
	small [smallHead]byte
}

// smallHead is the most bytes of head RespondCopy keeps in the slot itself: a produce
// answer with a short text.
const smallHead = 96

// Part is one part of a Response after its first: Head, then Iov, then Len bytes of File
// from Pos (File is -1 when none).
type Part struct {
	Head []byte
	Iov  [][]byte
	File int
	Pos  int64
	Len  int64
}

// part returns part i of r: 0 is r's own fields, i > 0 is r.More[i-1].
func (r *Response) part(i int) Part {
	if i == 0 {
		return Part{Head: r.Head, Iov: r.Iov, File: r.File, Pos: r.Pos, Len: r.Len}
	}
	return r.More[i-1]
}

// memBytes returns the bytes of memory an answer holds until it is written: the Head and
// Iov of every part (a file region is page cache, sent by sendfile).
func (r *Response) memBytes() int64 {
	var n int64
	for i := range 1 + len(r.More) {
		p := r.part(i)
		n += int64(len(p.Head))
		for _, b := range p.Iov {
			n += int64(len(b))
		}
	}
	return n
}

// Releaser is a parked request that can be answered early. Release must not block: it
// asks the request's owner to answer it now (the broker submits it to its shard).
type Releaser interface{ Release() }

// Conn is the broker's state for one connection. Respond is safe from any goroutine;
// everything else runs on the connection's loop.
type Conn struct {
	gc     gnet.Conn
	srv    *Server
	remote string // the client's address (RemoteAddr)

	mu struct {
		sync.Mutex
		queue  []*slot // in request order; the head is being written
		free   []*slot // written slots, for newSlot to reuse
		parked int     // slots with a Releaser set
		closed bool
	}
	wakePending atomic.Bool
	// wmu is held by whoever writes to the socket, the loop or a goroutine writing the
	// answer it just gave (send.go); it guards the writer state below. Only tried, never
	// waited for, except by shutdown. Taken before mu, never under it.
	wmu sync.Mutex
	// flushWanted: a writer found wmu held and asks its holder to look again (send.go).
	flushWanted atomic.Bool
	// closeAsked: a write made outside the loop failed, or wrote an answer that closes
	// the connection; the loop closes it when it next runs (woken for that).
	closeAsked atomic.Bool
	// pausedSeen mirrors paused for writers off the loop: what they write may end the
	// pause, which only the loop can (reader.go's stop, send.go).
	pausedSeen atomic.Bool
	out        atomic.Int64 // this connection's charge to the outbound budget
	timerFired atomic.Bool  // the frame timer fired; OnTraffic looks

	// Loop-only reader state (reader.go).
	in         inbuf
	held       int64       // what in is charged to the inbound budget (checkInbound)
	reads      uint64      // OnTraffic calls that brought bytes: progress for the frame timer
	timer      *time.Timer // the frame timer, made on first need
	timerArmed bool
	armedReads uint64 // reads when the timer was armed
	paused     bool   // the last read stopped at MaxInflight or the outbound share
	readAt     int64  // when the loop took the readable event it is handling (Unix ns)
	// The expiry (Expire): expiryGen numbers the arms (loop only); a timer that fires
	// stores its arm's number in expiryFired, and the loop acts on it only if it is
	// still the current arm's, so a cancelled timer that fired anyway does nothing.
	expiry      *time.Timer
	expiryGen   uint64
	expiryErr   error
	expiryFired atomic.Uint64

	// Writer state, under wmu.
	iov       [][]byte // what remains of the head response's bytes
	iovArr    [][]byte // the array iov is loaded into (loadIov)
	fileSent  int64    // bytes of the current part's file region already sent
	started   bool     // the iov of the head response's current parts was loaded
	part      int      // the head response's first part not yet loaded into iov
	filePart  int      // the loaded part whose file region follows the iov; -1 when none
	waiting   atomic.Bool
	dup       *os.File // dup of the socket for writability waits, made on first need
	closeNext bool     // close after the queue drains (fatal error answered)

	// state is the handler's own state for this connection (the broker's
	// authentication): loop only, like Handle.
	state any
	// frameLimit, when not 0, lowers MaxFrame for this connection; frameLimitErr is
	// what a frame over it is answered before the connection closes. Loop only.
	frameLimit    int
	frameLimitErr error
	// req is the request being decoded and handled; its body is kept for the next
	// request of the same hot API (reader.go's dispatch). Loop only.
	req wire.Request
}

// LimitFrames lowers the largest request frame this connection may send to n, from the
// next frame netio looks at (0 restores the server's MaxFrame, which n may not exceed);
// a frame over n is answered err (a fatal refusal: the connection closes after it) and
// nothing of it is buffered past its header. The broker holds connections that have not
// authenticated to the size of an authenticate request this way. Frames a client
// pipelined behind the request that changes the limit may have been measured against the
// old one already. Loop only: call it from Handle or Opened.
func (c *Conn) LimitFrames(n int, err error) {
	if n <= 0 || n >= c.srv.cfg.MaxFrame {
		n, err = 0, nil
	}
	c.frameLimit, c.frameLimitErr = n, err
}

// maxFrame is the largest frame this connection may send now. Loop only.
func (c *Conn) maxFrame() int {
	if c.frameLimit > 0 {
		return c.frameLimit
	}
	return c.srv.cfg.MaxFrame
}

// State returns what the handler stored with SetState, or nil. Loop only: call it from
// Handle, never from another goroutine.
func (c *Conn) State() any { return c.state }

// SetState keeps v as the handler's state for this connection, for as long as it is
// open. Loop only: call it from Handle.
func (c *Conn) SetState(v any) { c.state = v }

// Slot identifies a request's place in the response order; pass it to Respond.
type Slot struct {
	s   *slot
	gen uint32
}

// newSlot appends a slot for a request just read, reserving `reserved` bytes of the
// outbound budget for its answer. It reuses a written slot when there is one, and the
// queue keeps its array (popHeadLocked), so the steady state allocates nothing. Loop only.
func (c *Conn) newSlot(reserved int64) Slot {
	c.mu.Lock()
	var s *slot
	if n := len(c.mu.free); n > 0 {
		s = c.mu.free[n-1]
		c.mu.free[n-1] = nil
		c.mu.free = c.mu.free[:n-1]
	} else {
		s = new(slot)
	}
	s.reserved = reserved
	c.mu.queue = append(c.mu.queue, s)
	c.out.Add(reserved)
	c.srv.outBudget.reserved.Add(reserved)
	sl := Slot{s, s.gen}
	c.mu.Unlock()
	return sl
}

// popHeadLocked removes the written slot at the head of the queue, shifting the rest down
// rather than reslicing (a resliced queue loses its array's front, so the appends that
// follow would allocate a new array every few requests), and keeps the slot for reuse
// with its gen advanced: handles to it are stale from here. It returns the slot's Done
// and Close, which the caller acts on. The queue is short (at most the connection's
// in-flight requests), so the shift is a few words. Requires c.mu.
func (c *Conn) popHeadLocked() (done Doner, closeAfter bool) {
	q := c.mu.queue
	s := q[0]
	n := copy(q, q[1:])
	q[n] = nil
	c.mu.queue = q[:n]
	c.unchargeLocked(s)
	done, closeAfter = s.resp.Done, s.resp.Close
	s.gen++
	s.resp, s.ready, s.direct, s.release = Response{}, false, false, nil
	c.mu.free = append(c.mu.free, s)
	return done, closeAfter
}

// stale reports whether sl no longer names its slot's current request. Requires c.mu.
func (sl Slot) stale() bool { return sl.s.gen != sl.gen }

// inflight returns the number of requests not yet fully answered. Loop only.
func (c *Conn) inflight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.queue)
}

// Expire arms (d > 0) or cancels (d <= 0) the connection's expiry: unless Expire is
// called again first, d from now the connection is answered err (an error frame for
// request 0) and closed, as a refused one is. The broker arms it for a connection that
// must authenticate in time. Loop only (a handler, or the Opener).
func (c *Conn) Expire(d time.Duration, err error) {
	if c.expiry != nil {
		c.expiry.Stop()
		c.expiry = nil
	}
	c.expiryGen++
	c.expiryErr = err
	if d <= 0 || err == nil {
		return
	}
	gen := c.expiryGen
	c.expiry = time.AfterFunc(d, func() {
		c.expiryFired.Store(gen)
		c.wake()
	})
}

// expired reports whether the current arm of the expiry fired. Loop only.
func (c *Conn) expired() bool {
	return c.expiry != nil && c.expiryFired.Load() == c.expiryGen
}

// ReadAt returns when the event loop began handling the readable event that brought the
// request it is handling (Unix ns): a handler's start minus it is the time the request
// waited on its loop behind the requests read with it. Loop only, from a handler.
func (c *Conn) ReadAt() int64 { return c.readAt }

// Respond fills a request's slot with its response and wakes the loop to write it. Safe
// from any goroutine. A slot is answered once: a second answer (after the connection
// closed, or a request answered twice, as when a panic is answered after the handler had
// answered) is dropped, and its Done run.
//
// Answers go out in request order, so a parked long poll would hold up every later
// answer on its connection (a consumer pipelining fetches for several partitions would
// wait for its quietest one). So when an answer is ready behind parked requests (Park),
// those are released: asked to answer now with what they have. Max wait is an upper
// bound, and the client simply asks again.
func (c *Conn) Respond(sl Slot, resp Response) {
	c.mu.Lock()
	c.respondLocked(sl, resp)
}

// RespondCopy answers with head alone, copied into the slot itself when it fits
// (smallHead bytes), so that a small answer built on the caller's stack costs no
// allocation; a larger head is copied to a buffer of its own. Safe from any goroutine,
// like Respond.
func (c *Conn) RespondCopy(sl Slot, head []byte) {
	c.mu.Lock()
	if c.mu.closed || sl.stale() || sl.s.ready {
		c.mu.Unlock()
		return
	}
	var h []byte
	if len(head) <= smallHead {
		h = sl.s.small[:len(head):len(head)]
		copy(h, head)
	} else {
		h = append([]byte(nil), head...)
	}
	c.respondLocked(sl, Response{Head: h, File: -1})
}

// respondLocked is Respond with c.mu held; it unlocks it.
func (c *Conn) respondLocked(sl Slot, resp Response) {
	if c.mu.closed || sl.stale() || sl.s.ready {
		c.mu.Unlock()
		if resp.Done != nil {
			resp.Done.Done()
		}
		return
	}
	sl.s.resp, sl.s.ready, sl.s.direct = resp, true, resp.direct()
	c.chargeLocked(sl.s, resp.memBytes())
	if sl.s.release != nil {
		sl.s.release = nil
		c.mu.parked--
	}
	head := len(c.mu.queue) > 0 && c.mu.queue[0] == sl.s
	direct := head && sl.s.direct
	var release [4]Releaser // the usual case, without allocating
	toRelease := release[:0]
	if !head && c.mu.parked > 0 {
		toRelease = c.takeParkedBeforeLocked(sl.s, toRelease)
	}
	c.mu.Unlock()
	switch {
	case direct:
		c.send()
	case head:
		c.wake()
	}
	c.release(toRelease)
}

// chargeLocked turns a slot's reservation into the charge of its answer, queued bytes.
// Requires c.mu.
func (c *Conn) chargeLocked(s *slot, queued int64) {
	b := &c.srv.outBudget
	c.out.Add(queued - s.reserved)
	b.reserved.Add(-s.reserved)
	b.queued.Add(queued)
	s.reserved, s.queued = 0, queued
}

// unchargeLocked releases what a slot holds of the outbound budget: written, or dropped
// with its connection. Requires c.mu.
func (c *Conn) unchargeLocked(s *slot) {
	b := &c.srv.outBudget
	c.out.Add(-s.reserved - s.queued)
	b.reserved.Add(-s.reserved)
	b.queued.Add(-s.queued)
	s.reserved, s.queued = 0, 0
}

// Park marks a request as waiting (a long poll) until r answers it: if an answer behind it
// on this connection is ready, now or later, netio calls r.Release once. Safe from any
// goroutine; Respond on the slot ends the park.
func (c *Conn) Park(sl Slot, r Releaser) {
	c.mu.Lock()
	if sl.stale() || sl.s.ready || sl.s.release != nil {
		c.mu.Unlock()
		return
	}
	// Release at once when an answer behind it is ready already; when the connection
	// is closed (nothing else would release it: the poll would hold its partitions'
	// waiters and its memory for its whole max wait); and when the connection is
	// paused (stop released the polls parked when it paused, not one parked since, and
	// the request that would end the pause waits behind it).
	now := c.mu.closed || c.pausedSeen.Load()
	for i := len(c.mu.queue) - 1; !now && i >= 0 && c.mu.queue[i] != sl.s; i-- {
		now = c.mu.queue[i].ready
	}
	if !now {
		sl.s.release = r
		c.mu.parked++
	}
	c.mu.Unlock()
	if now {
		c.release([]Releaser{r})
	}
}

// takeParkedBeforeLocked appends the releasers of the parked slots ahead of s in the queue
// (all of them when s is nil) to dst and clears them. Requires c.mu.
func (c *Conn) takeParkedBeforeLocked(s *slot, dst []Releaser) []Releaser {
	for _, q := range c.mu.queue {
		if q == s || c.mu.parked == 0 {
			break
		}
		if q.release != nil {
			dst = append(dst, q.release)
			q.release = nil
			c.mu.parked--
		}
	}
	return dst
}

func (c *Conn) release(rs []Releaser) {
	for _, r := range rs {
		c.srv.stats.released.Add(1)
		r.Release()
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

// RemoteAddr returns the client's address. Safe from any goroutine: it is kept at open
// (gnet's own is not safe off the loop, and gone once the connection closed).
func (c *Conn) RemoteAddr() string { return c.remote }

// releaseParked asks every parked request of the connection to answer now: it cannot take
// its next request (MaxInflight, or its outbound share reserved by long polls), and a
// parked poll would hold that request up for its whole max wait. Loop only.
func (c *Conn) releaseParked() {
	c.mu.Lock()
	var parked []Releaser
	if c.mu.parked > 0 {
		parked = c.takeParkedBeforeLocked(nil, nil)
	}
	c.mu.Unlock()
	c.release(parked)
}

// shutdown marks the connection closed, releases what its ready responses hold, its
// charges to the budgets and its inbound buffer, and releases its parked requests (their
// answers will be dropped, but their owners stop holding them at once). Loop only.
func (c *Conn) shutdown() {
	// A write in progress on another goroutine ends first: it may be sending from what
	// the Done calls below release, and gnet closes the socket when OnClose returns.
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	c.mu.closed = true
	queue := c.mu.queue
	c.mu.queue = nil
	var parked []Releaser
	for _, s := range queue {
		c.unchargeLocked(s)
		if s.release != nil {
			parked = append(parked, s.release)
			s.release = nil
		}
	}
	c.mu.parked = 0
	c.mu.Unlock()
	c.dropInbound()
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.expiry != nil {
		c.expiry.Stop()
	}
	for _, s := range queue {
		if s.ready && s.resp.Done != nil {
			s.resp.Done.Done()
		}
	}
	c.release(parked)
	if c.dup != nil {
		c.dup.Close() // also ends a pending writability wait
		c.dup = nil
	}
}
