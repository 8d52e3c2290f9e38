package netio

import "errors"

// Writing where the answer is made. An answer used to go out only from the connection's
// loop: Respond woke the loop (gnet's Wake, an eventfd write), and the loop, once
// scheduled, wrote it. For a long poll woken by a produce on another connection that is
// one more thread to wake between the producer and the consumer, and for every answer
// made on the loop itself one more eventfd round before the write; on two busy cores
// those wake-ups were most of the broker's share of end-to-end latency (BenchmarkWake).
//
// So the goroutine that makes an answer at the head of the queue writes it itself, when
// no one else is writing on the connection (wmu, tried, never waited for): the same
// non-blocking writev and sendfile the loop would make, then the answers ready behind it.
// When the socket is full it waits for writability as the loop does; when another writer
// holds the connection, or the answer is large, it wakes the loop as before. The loop
// takes wmu (waiting the few microseconds a write takes) before it writes, reads the
// queue under it, and so writes whatever a writer that gave up on wmu left ready.
//
// A large answer (above directMax), or one with a file region, still goes from the
// loop: a shard, or another connection's loop, should not spend a millisecond sending a
// consumer's megabytes, nor wait on a sendfile that reads the disk (an event loop that
// appended must never wait for the disk: broker/produce.go).
const directMax = 256 << 10

// direct reports whether an answer may be written by the goroutine that gave it: memory
// only, and at most directMax bytes.
func (r *Response) direct() bool {
	for i := range 1 + len(r.More) {
		if r.part(i).Len > 0 {
			return false
		}
	}
	return r.memBytes() <= directMax
}

// send writes what is ready at the head of the queue from the calling goroutine, or
// leaves it to the loop when another writer holds the connection. Any goroutine.
func (c *Conn) send() {
	if !c.wmu.TryLock() {
		// The holder may have looked at the queue before this answer was ready: the
		// loop looks again once the holder is done.
		c.wake()
		return
	}
	switch err := c.flushDirect(); {
	case err == nil:
		if c.pausedSeen.Load() {
			c.wake() // the loop takes the requests it held while the answers were due
		}
	case errors.Is(err, errLoop):
		c.wake()
	default:
		if !errors.Is(err, errClosing) && !isConnReset(err) {
			c.srv.cfg.Logger.Debug("write failed", "remote", c.RemoteAddr(), "err", err)
		}
		c.closeAsked.Store(true) // the loop closes it: only the loop may
		c.wake()
	}
}

// flushDirect is send's flush. The lock is released however flush ends: a Done that
// panics (a double release is a bug the caller's recovery reports) must not leave the
// connection's writer held, which would stop its loop for good.
func (c *Conn) flushDirect() error {
	defer c.wmu.Unlock()
	return c.flush(true)
}

// flushLoop is the loop's flush: it waits for a writer on another goroutine to finish.
func (c *Conn) flushLoop() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.flush(false)
}
