package netio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/panjf2000/gnet/v2"

	"sluice/internal/invariants"
	"sluice/wire"
)

// Reading. gnet calls OnTraffic with whatever one read(2) brought (at most its read buffer,
// gnetReadCap: see receive.go for what netio reads itself) and appends what OnTraffic leaves to its own unbounded buffer, so OnTraffic takes
// everything, every time. Whole frames are handed to the handler in place while the
// connection may take requests; the rest goes to the connection's inbuf, charged to the
// inbound budget: the tail of a partial frame, and everything that arrives while the
// connection has MaxInflight requests outstanding or its answers hold its outbound share.
// gnet cannot stop reading the socket, so while a connection takes no requests its
// bytes pile up there, and when the budget or its cap will not take them the connection
// is refused: answered with busy and closed. A partial frame that receives nothing for
// FrameTimeout is answered with timeout and closed (one timer per connection).

// OnTraffic writes what is ready, then reads; then the handler's BeforeWait runs.
func (s *Server) OnTraffic(gc gnet.Conn) gnet.Action {
	action := s.traffic(gc)
	s.beforeWait()
	return action
}

// traffic is OnTraffic's work. Loop only.
func (s *Server) traffic(gc gnet.Conn) gnet.Action {
	c := gc.Context().(*Conn)
	c.wakePending.Store(false)
	data, _ := gc.Next(-1) // all of it: nothing may stay in gnet's inbound buffer
	if invariants.Enabled && gc.InboundBuffered() != 0 {
		panic(fmt.Sprintf("BUG: netio: %d bytes left in gnet's inbound buffer", gc.InboundBuffered()))
	}
	if len(data) > 0 {
		c.reads++
		c.readAt = time.Now().UnixNano() // one clock read per readable event (ReadAt)
	}
	more := len(data) == gnetReadCap // gnet's read filled its buffer: the socket may hold more
	if c.timerFired.Swap(false) {
		if action := c.onFrameTimer(); action != gnet.None {
			return action
		}
	}
	if c.expired() && !c.closeNext {
		err := c.expiryErr
		c.Expire(0, nil)
		c.srv.stats.expired.Add(1)
		return c.refuse(wire.RequestHeader{}, err)
	}
	if c.closeAsked.Load() {
		return gnet.Close // a write off the loop failed or answered a fatal error (send.go)
	}
	if err := c.flushLoop(); err != nil {
		if !errors.Is(err, errClosing) && !isConnReset(err) {
			s.cfg.Logger.Debug("write failed", "remote", gc.RemoteAddr(), "err", err)
		}
		return gnet.Close
	}
	if c.closeNext {
		return c.closing()
	}
	action := c.read(data)
	if action == gnet.None && more && !c.closeNext {
		action = c.readMore(gc.Fd())
	}
	return action
}

// read hands whole frames to the handler in stream order — first those held from earlier
// reads, then those in data, in place — while the connection may take requests, and holds
// the rest. Loop only.
func (c *Conn) read(data []byte) gnet.Action {
	for c.in.len() > 0 {
		if c.in.whole == 0 {
			// Complete the partial frame at the head, taking only what it lacks: the
			// frames behind it are handed over in place.
			n := min(c.in.missing(), len(data))
			if n == 0 {
				break
			}
			if action := c.hold(data[:n]); action != gnet.None || c.closeNext {
				return action
			}
			data = data[n:]
			continue
		}
		if c.stop(wire.APIKey(binary.LittleEndian.Uint16(c.in.bytes()[4:]))) {
			break
		}
		size := c.in.headSize()
		if action := c.dispatch(c.in.bytes()[:size]); action != gnet.None || c.closeNext {
			return action
		}
		c.in.consume(&c.srv.bufs, size)
		c.recharge()
	}
	for c.in.len() == 0 && len(data) > 0 {
		size, hdr, whole, err := c.frameAt(data)
		if err != nil {
			return c.srv.refuseProtocol(c, hdr, err)
		}
		if !whole || c.stop(hdr.APIKey) {
			break
		}
		if action := c.dispatch(data[:size]); action != gnet.None || c.closeNext {
			return action
		}
		data = data[size:]
	}
	if len(data) > 0 {
		if action := c.hold(data); action != gnet.None {
			return action
		}
	}
	if c.in.partial() && !c.timerArmed {
		c.armFrameTimer()
	}
	if invariants.Enabled {
		c.checkInbound()
	}
	return gnet.None
}

// frameAt looks at the frame at the front of data: its size once its length field is
// there (0 before), its header once that is, and whether it is whole. err is set for a
// frame the server refuses: too large, or a header it cannot serve.
func (c *Conn) frameAt(data []byte) (size int, hdr wire.RequestHeader, whole bool, err error) {
	if len(data) < 4 {
		return 0, hdr, false, nil
	}
	size = int(binary.LittleEndian.Uint32(data)) + 4
	if _, hdr, err = wire.PeekFrame(data, c.maxFrame()); err != nil && !errors.Is(err, wire.ErrShort) {
		if c.frameLimitErr != nil && errors.Is(err, wire.ErrFrameTooLarge) {
			err = c.frameLimitErr
		}
		return size, hdr, false, err
	}
	return size, hdr, len(data) >= size, nil
}

// stop reports whether the connection must not take its next request, of API api, now:
// it has MaxInflight requests outstanding, or the request is a fetch and the answers it
// waits for already hold its outbound share. On the way into that state it releases its
// parked long polls, which would otherwise hold it up for their whole max wait.
func (c *Conn) stop(api wire.APIKey) bool {
	s := c.srv
	switch {
	case c.inflight() >= s.cfg.MaxInflight:
		if !c.paused {
			s.stats.pausedInflight.Add(1)
		}
	case !s.outBudget.mayTake(c, api):
		if !c.paused {
			s.stats.pausedOutbound.Add(1)
		}
	default:
		c.unpause()
		return false
	}
	if !c.paused {
		// Written answers free what the pause waits for, and a writer off the loop
		// wakes the loop for that only if it sees the pause (send.go). So the pause is
		// published before the conditions are looked at again: a writer that freed a
		// slot after that second look sees it; one that did so before, the look does.
		c.pausedSeen.Store(true)
		if c.inflight() < s.cfg.MaxInflight && s.outBudget.mayTake(c, api) {
			c.pausedSeen.Store(false)
			return false
		}
		c.paused = true
		c.releaseParked()
	}
	return true
}

// unpause ends a pause. Loop only.
func (c *Conn) unpause() {
	if c.paused {
		c.paused = false
		c.pausedSeen.Store(false)
	}
}

// dispatch decodes a whole frame and hands it to the handler; a well-framed request with
// a bad field is answered with its error, a frame that cannot be decoded refuses the
// connection.
func (c *Conn) dispatch(frame []byte) gnet.Action {
	s := c.srv
	req := &c.req
	_, err := req.Decode(frame, s.cfg.MaxFrame)
	if err == nil {
		s.stats.requests.Add(1)
		s.stats.bytesRead.Add(uint64(len(frame)))
		s.handle(c, c.newSlot(s.outBudget.reserve(c, req)), req)
		forgetFrame(req)
		return gnet.None
	}
	req.Body = nil // a body that failed to decode holds what it had decoded
	_, hdr, _ := wire.PeekFrame(frame, s.cfg.MaxFrame)
	if !wire.CodeOf(err).Fatal() {
		// A whole, well-framed request with a bad field (a topic name, say): answer it
		// and go on reading; only framing errors end the connection.
		s.stats.protocolErrs.Add(1)
		c.Respond(c.newSlot(0), Response{Head: wire.AppendErrorResponse(nil, hdr, err), File: -1})
		return gnet.None
	}
	return s.refuseProtocol(c, hdr, err)
}

// reusedBody reports whether the decoded body of a request of API k is kept for the next
// request on the connection (Request.Decode decodes into a body of the same API): the
// requests that come many times a second, so that decoding them allocates nothing. A
// handler does not keep a request past Handle (Handler), but some copy the body to
// finish off the loop (create_topic), and a copy shares the body's slices, which the next
// decode would overwrite: those bodies are made afresh each time.
func reusedBody(k wire.APIKey) bool {
	switch k {
	case wire.APIProduce, wire.APIFetch, wire.APIFetchMulti:
		return true
	}
	return false
}

// forgetFrame drops what the kept request refers to of the frame just handled: the
// fields that alias it, whose memory the inbound buffer reuses or unmaps from here, and
// every body but a reused one.
func forgetFrame(req *wire.Request) {
	switch b := req.Body.(type) {
	case *wire.ProduceRequest:
		b.Topic, b.Batches = nil, nil
	case *wire.FetchRequest:
		b.Topic = nil
	case *wire.FetchMultiRequest:
		b.Topic = nil
	}
	if !reusedBody(req.Header.APIKey) {
		req.Body = nil
	}
}

// hold keeps p after the bytes held and checks the headers of the frames it completes or
// starts. The inbound budget is charged before any memory is touched; when it or the
// connection's cap will not take p, or a header is bad, the connection is refused.
func (c *Conn) hold(p []byte) gnet.Action {
	n := c.in.len() + len(p)
	if r := c.room(n, n); r != admitted {
		return c.refuseBudget(r, p)
	}
	copied := copy(c.in.mem[c.in.w:], p)
	c.in.w += copied
	c.srv.stats.bytesHeld.Add(uint64(copied))
	return c.took()
}

// took checks the headers of the frames that the bytes just added to the inbuf complete
// or start and, once a partial frame's size is known, makes room for all of it.
func (c *Conn) took() gnet.Action {
	if hdr, err := c.scan(); err != nil {
		return c.srv.refuseProtocol(c, hdr, err)
	}
	if !c.in.partial() || c.in.next == 0 {
		c.recharge() // a large frame just completed is charged for what it touched
		return gnet.None
	}
	// The partial frame's size is known: make room for all of it at once, so that it is
	// copied once however many reads it spans, and reserve it if it is large.
	if r := c.room(c.in.whole+c.in.next, c.in.len()); r != admitted {
		return c.refuseBudget(r, nil)
	}
	return gnet.None
}

// room makes the inbuf able to hold capacity bytes, fill of them written, charging the
// inbound budget for the pages that will have been touched (and, while a large frame is
// partial, for all of it: see reserved) before any is; on refusal nothing changes.
func (c *Conn) room(capacity, fill int) refusal {
	s := c.srv
	g, err := c.in.plan(&s.bufs, capacity, fill)
	if err != nil {
		s.cfg.Logger.Error("cannot buffer a request: refusing the connection", "remote", c.RemoteAddr(), "err", err)
		return overBudget
	}
	charge := max(cost(g.size, g.touched), c.reserved())
	r := s.inBudget.resize(c.held, charge)
	if r != admitted && c.in.mem != nil {
		// Pages the consumed front of the buffer left resident count until they are given
		// back: compact and shed them, then ask again, so that a connection is refused
		// for what it holds, not for what it held.
		c.in.abandon(&s.bufs, g)
		c.in.shed() // c.held stays as charged: the resize below moves it to the new charge
		if g, err = c.in.plan(&s.bufs, capacity, fill); err != nil {
			s.cfg.Logger.Error("cannot buffer a request: refusing the connection", "remote", c.RemoteAddr(), "err", err)
			return overBudget
		}
		charge = max(cost(g.size, g.touched), c.reserved())
		r = s.inBudget.resize(c.held, charge)
	}
	if r != admitted {
		c.in.abandon(&s.bufs, g)
		c.settleShed()
		return r
	}
	if err := c.in.apply(&s.bufs, g); err != nil {
		s.cfg.Logger.Error("cannot buffer a request: refusing the connection", "remote", c.RemoteAddr(), "err", err)
		s.inBudget.resize(charge, c.held)
		return overBudget
	}
	c.held = charge
	return admitted
}

// settleShed brings the charge down to what the buffer costs after a shed that did not
// make the room asked for: a caller that goes on with the connection (receive, which then
// reads nothing) must not keep it charged for the pages the shed gave back. It never
// grows the charge: a large frame whose reservation is not charged yet (the caller is
// about to refuse the connection) keeps what it had.
func (c *Conn) settleShed() {
	charge := c.reserved()
	if c.in.mem != nil {
		charge = max(charge, cost(len(c.in.mem), c.in.touched))
	}
	if charge < c.held {
		c.srv.inBudget.resize(c.held, charge) // never refused: it does not grow
		c.held = charge
	}
}

// reserved returns what the connection's partial frame reserves of the inbound budget: a
// frame too large to count as a small holding is admitted whole or not at all, from its
// header, so that large frames arriving together cannot each take part of the budget and
// all be refused half-way; a small one is charged as its bytes arrive.
func (c *Conn) reserved() int64 {
	if !c.in.partial() || c.in.next == 0 {
		return 0
	}
	if want := int64(c.in.whole + c.in.next); want > c.srv.inBudget.smallHold {
		return want
	}
	return 0
}

// recharge brings the inbound budget's charge in line with the inbuf after bytes left it.
func (c *Conn) recharge() {
	charge := c.reserved()
	if c.in.mem != nil {
		charge = max(charge, cost(len(c.in.mem), c.in.touched))
	}
	if charge > c.held {
		panic(fmt.Sprintf("BUG: netio: recharge grows the inbound charge from %d to %d", c.held, charge))
	}
	c.srv.inBudget.resize(c.held, charge) // never refused: it does not grow
	c.held = charge
}

// checkInbound verifies that the inbound charge is what the buffer holds (under the
// invariants build tag).
func (c *Conn) checkInbound() {
	want := c.reserved()
	if c.in.mem != nil {
		want = max(want, cost(len(c.in.mem), c.in.touched))
	}
	b := &c.in
	if c.held != want || b.whole > b.len() || b.w > b.touched || b.touched > len(b.mem) || b.r > b.w {
		panic(fmt.Sprintf("BUG: netio: inbound charge %d for %+v (want %d)", c.held,
			struct{ size, r, w, whole, next, touched int }{len(b.mem), b.r, b.w, b.whole, b.next, b.touched}, want))
	}
}

// scan checks the frames held past the whole ones: each header as soon as its bytes are
// there. It counts the frames that are whole and records the size of the partial one.
func (c *Conn) scan() (wire.RequestHeader, error) {
	b := &c.in
	for {
		size, hdr, whole, err := c.frameAt(b.mem[b.r+b.whole : b.w])
		if err != nil || !whole {
			b.next = size
			return hdr, err
		}
		b.whole += size
	}
}

// dropInbound releases the inbuf and its charge.
func (c *Conn) dropInbound() {
	c.in.release(&c.srv.bufs)
	c.recharge()
}

// refuseProtocol answers a frame the server cannot decode with an error frame and closes
// the connection once it is written.
func (s *Server) refuseProtocol(c *Conn, hdr wire.RequestHeader, err error) gnet.Action {
	s.stats.protocolErrs.Add(1)
	s.cfg.Logger.Debug("refusing request", "remote", c.RemoteAddr(), "err", err)
	return c.refuse(hdr, err)
}

// refuseBudget refuses a connection the inbound budget or its own cap will not take more
// of, with busy: the client may retry on a new connection.
func (c *Conn) refuseBudget(r refusal, p []byte) gnet.Action {
	s := c.srv
	s.inBudget.count(r)
	var msg string
	if r == overConn {
		msg = fmt.Sprintf("the connection holds more than %d bytes of requests the broker has not read yet", s.inBudget.connMax)
	} else {
		msg = fmt.Sprintf("the broker's memory for requests being read (%d bytes) is in use: retry", s.inBudget.limit)
	}
	s.cfg.Logger.Debug("refusing connection", "remote", c.RemoteAddr(), "reason", msg)
	return c.refuse(c.headHeader(p), wire.NewError(wire.CodeBusy, msg))
}

// headHeader returns the header of the first request not handed over (the next one the
// client expects an answer to), from the bytes held and then p, as far as it was read.
func (c *Conn) headHeader(p []byte) wire.RequestHeader {
	var head [wire.RequestHeaderSize]byte
	n := copy(head[:], c.in.bytes())
	n += copy(head[n:], p)
	if n < wire.RequestHeaderSize {
		return wire.RequestHeader{}
	}
	_, hdr, _ := wire.PeekFrame(head[:], 1<<31)
	return hdr
}

// refuse answers err to the request with header hdr (as far as it was read) and closes
// the connection once that answer is written (see closing). It drops what the connection
// holds at once, reads nothing more and releases its parked long polls, so that the answer
// is not held up behind them.
func (c *Conn) refuse(hdr wire.RequestHeader, err error) gnet.Action {
	c.dropInbound()
	c.closeNext = true
	c.Respond(c.newSlot(0), Response{Head: wire.AppendErrorResponse(nil, hdr, err), File: -1, Close: true})
	c.releaseParked() // answers behind long polls would otherwise wait for their max wait
	c.armFrameTimer()
	if ferr := c.flushLoop(); ferr != nil || c.closeAsked.Load() {
		return gnet.Close // (closeAsked: Respond wrote the answer itself, send.go)
	}
	return c.closing()
}

// closing decides about a connection that is being closed after an error answer, while
// what arrives on it is dropped: it is closed at once when its socket is full, since a
// client that does not read what was answered before would never get that answer either
// (and would go on sending for nothing); otherwise the answer waits for the answers before
// it, for at most FrameTimeout.
func (c *Conn) closing() gnet.Action {
	if c.waiting.Load() {
		return gnet.Close
	}
	return gnet.None
}

// armFrameTimer starts the connection's timer for FrameTimeout; it fires on a runtime
// goroutine and wakes the loop, which looks at the connection (onFrameTimer).
func (c *Conn) armFrameTimer() {
	c.armedReads, c.timerArmed = c.reads, true
	if c.timer == nil {
		c.timer = time.AfterFunc(c.srv.cfg.FrameTimeout, func() {
			c.timerFired.Store(true)
			c.wake()
		})
		return
	}
	c.timer.Reset(c.srv.cfg.FrameTimeout)
}

// onFrameTimer runs on the loop once the timer fired: it closes a connection still
// closing after an error, refuses one whose partial frame received nothing since the
// timer was armed, and otherwise arms the timer again while a frame is partial.
func (c *Conn) onFrameTimer() gnet.Action {
	c.timerArmed = false
	switch {
	case c.closeNext:
		return gnet.Close // it had FrameTimeout to take its error answer
	case !c.in.partial():
		return gnet.None
	case c.reads != c.armedReads:
		c.armFrameTimer() // it made progress: wait again
		return gnet.None
	}
	c.srv.stats.timedOut.Add(1)
	return c.refuse(c.headHeader(nil), wire.NewError(wire.CodeTimeout,
		fmt.Sprintf("no byte of a partial request frame for %v", c.srv.cfg.FrameTimeout)))
}
