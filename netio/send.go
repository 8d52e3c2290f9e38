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
// no one else is writing on the connection: the same non-blocking writev the loop would
// make, then the answers ready behind it. When the socket is full it waits for
// writability as the loop does. Nobody waits for the writer's lock, wmu, not even the
// loop (a writer preempted while holding it would stop every connection of the loop):
// whoever finds it held asks the holder to look at the queue again (flushWanted), and
// the holder does once it is done (flushOrLeave), so nothing made ready meanwhile is left
// behind. Only shutdown waits for wmu.
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
// leaves it to the writer holding the connection. Any goroutine.
func (c *Conn) send() {
	wrote, err := c.flushOrLeave(true)
	switch {
	case !wrote:
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

// flushLoop is the loop's flush.
func (c *Conn) flushLoop() error {
	_, err := c.flushOrLeave(false)
	return err
}

// maxTurns bounds how often one writer flushes again for others (maxTurns times after
// its own flush) before it leaves the rest to the loop.
const maxTurns = 8

// flushOrLeave flushes under wmu, again as long as someone asked meanwhile, and reports
// whether it held wmu; when wmu is held by another writer it asks that writer to look
// again and returns at once. Stores to flushWanted come before the try and loads after
// the unlock (Go's atomics are sequentially consistent): a writer that failed its try
// after the holder's last look is seen by that look, or tries after the holder's unlock.
func (c *Conn) flushOrLeave(direct bool) (bool, error) {
	for turn := 0; ; turn++ {
		c.flushWanted.Store(true)
		if !c.wmu.TryLock() {
			return turn > 0, nil // the holder looks again
		}
		c.flushWanted.Store(false)
		if err := c.flushHeld(direct); err != nil || !c.flushWanted.Load() {
			return true, err
		}
		if turn == maxTurns {
			c.wake() // answers keep coming: the loop takes over
			return true, nil
		}
	}
}

// flushHeld runs flush with wmu held, and releases it however flush ends: a Done that
// panics (a double release is a bug the caller's recovery reports) must not leave the
// connection's writer held, which would stop its writes for good. A panic also skips
// flushOrLeave's second look, which writers that found wmu held count on: the loop
// looks instead.
func (c *Conn) flushHeld(direct bool) error {
	returned := false
	defer func() {
		c.wmu.Unlock()
		if !returned {
			c.wake()
		}
	}()
	err := c.flush(direct)
	if f := c.srv.cfg.afterFlush; f != nil {
		f()
	}
	returned = true
	return err
}
