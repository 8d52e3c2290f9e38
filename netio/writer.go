package netio

import (
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// maxSendfile bounds one sendfile call, so that one call never holds the loop for a
// whole large region's disk reads. The loop goes on calling until the region is sent or
// the socket is full; the socket's buffer, not this bound, is what gives the loop back
// to its other connections.
const maxSendfile = 1 << 20

// errBlocked says the socket buffer is full; writing resumes when it drains.
var errBlocked = errors.New("socket not writable")

// flush writes ready responses from the head of the queue until the queue is empty, the
// head is not ready, or the socket is full; off the loop (direct, send.go) also until
// the head is an answer only the loop may write (errLoop). Requires wmu.
// A write error closes the connection.
func (c *Conn) flush(direct bool) error {
	if c.waiting.Load() {
		return nil // a writability wait will wake us
	}
	for {
		c.mu.Lock()
		if len(c.mu.queue) == 0 || !c.mu.queue[0].ready {
			c.mu.Unlock()
			return nil
		}
		s := c.mu.queue[0]
		c.mu.Unlock()
		if direct && !s.direct { // also one the loop began: it resumes it
			return errLoop
		}
		if err := c.writeResponse(&s.resp); err != nil {
			if errors.Is(err, errBlocked) {
				return c.waitWritable()
			}
			return err
		}
		c.mu.Lock()
		done, closeAfter := c.popHeadLocked() // s may be reused from here
		c.mu.Unlock()
		c.started, c.fileSent, c.part = false, 0, 0
		if direct {
			c.srv.stats.directWrites.Add(1)
		} else {
			c.srv.stats.loopWrites.Add(1)
		}
		if done != nil {
			done.Done()
		}
		if closeAfter {
			return errClosing
		}
	}
}

// errLoop says a direct write left the rest to the loop (send.go).
var errLoop = errors.New("left to the loop")

// errClosing asks the loop to close the connection after a fatal error was answered.
var errClosing = errors.New("closing after a fatal protocol error")

// writeResponse writes (the rest of) one response, part by part: the bytes of
// consecutive parts by one writev, up to and including the first part with a file region,
// then that region by sendfile, and so on. Memory-only parts (a multi-partition fetch
// answered from the arena) thus cost one writev for the whole answer, not one per part.
// It returns errBlocked when the socket is full.
func (c *Conn) writeResponse(r *Response) error {
	for {
		if !c.started {
			c.loadIov(r)
		}
		if err := c.writeIov(); err != nil {
			return err
		}
		if c.filePart >= 0 {
			p := r.part(c.filePart)
			if err := c.sendFile(p.File, p.Pos, p.Len); err != nil {
				return err
			}
		}
		if c.part > len(r.More) {
			return nil
		}
		c.started, c.fileSent = false, 0
	}
}

// loadIov loads the bytes of the parts from c.part on into c.iov, up to and including
// the first part with a file region (c.filePart; -1 when none).
func (c *Conn) loadIov(r *Response) {
	// From the start of the array kept in iovArr: writes advance c.iov through it, and
	// appending to what they leave would allocate a new array for every answer.
	c.iov, c.filePart = c.iovArr[:0], -1
	for c.part <= len(r.More) {
		p := r.part(c.part)
		// No empty buffers: writev of empty buffers only writes 0 bytes (a part may have
		// no Head: fetch_multi version 2 sends every part header in the first).
		if len(p.Head) > 0 {
			c.iov = append(c.iov, p.Head)
		}
		for _, b := range p.Iov {
			if len(b) > 0 {
				c.iov = append(c.iov, b)
			}
		}
		c.part++
		if p.Len > 0 {
			c.filePart = c.part - 1
			break
		}
	}
	c.iovArr = c.iov[:0] // the array, grown or not
	c.started = true
}

// maxIov is the most buffers one writev takes (IOV_MAX on Linux).
const maxIov = 1024

// writeIov writes what c.iov holds.
func (c *Conn) writeIov() error {
	fd := c.gc.Fd()
	for len(c.iov) > 0 {
		n, err := unix.Writev(fd, c.iov[:min(len(c.iov), maxIov)])
		if n > 0 {
			c.srv.stats.bytesCopied.Add(uint64(n))
		}
		c.iov = advance(c.iov, max(n, 0)) // also drops empty buffers: never a loop writing 0 bytes
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			if err == unix.EAGAIN {
				return errBlocked
			}
			return err
		}
	}
	return nil
}

// sendFile sends what is left of a part's file region (c.fileSent of n bytes are sent).
func (c *Conn) sendFile(file int, pos, n int64) error {
	fd := c.gc.Fd()
	for c.fileSent < n {
		off := pos + c.fileSent
		sent, err := unix.Sendfile(fd, file, &off, int(min(n-c.fileSent, maxSendfile)))
		if sent > 0 {
			c.fileSent += int64(sent)
			c.srv.stats.bytesSendfile.Add(uint64(sent))
		}
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			if err == unix.EAGAIN {
				return errBlocked
			}
			return err
		}
		if sent == 0 {
			return errors.New("sendfile: segment file shorter than its region")
		}
	}
	return nil
}

// advance drops n written bytes from the front of iov.
func advance(iov [][]byte, n int) [][]byte {
	for n > 0 && len(iov) > 0 {
		if n < len(iov[0]) {
			iov[0] = iov[0][n:]
			return iov
		}
		n -= len(iov[0])
		iov = iov[1:]
	}
	for len(iov) > 0 && len(iov[0]) == 0 {
		iov = iov[1:]
	}
	return iov
}

// waitWritable parks a goroutine on Go's netpoller until the socket is writable, then
// wakes the loop. A socket whose client takes nothing for SendTimeout has the loop close
// the connection: the client stopped reading, and its answers, and what they hold, go
// with it.
//
// "Took nothing" is measured, not inferred from the wait's length: Linux reports a TCP
// socket writable only once a third of its send buffer is free, so a client that reads
// steadily but slowly (a few KB/s against a buffer of megabytes) may keep the wait
// going for minutes. So when the deadline passes, the bytes the socket still holds
// (SIOCOUTQ: written and not yet acknowledged by the client) are compared with what it
// held when the wait began: fewer means the client read, and the wait goes on for
// another SendTimeout from there. Found by review (a reader of 400 KB/s was closed
// after 0.5 s). Requires wmu.
func (c *Conn) waitWritable() error {
	if c.dup == nil {
		fd, err := unix.Dup(c.gc.Fd())
		if err != nil {
			return err
		}
		c.dup = os.NewFile(uintptr(fd), "sluice-conn") // non-blocking: registered with the netpoller
	}
	rc, err := c.dup.SyscallConn()
	if err != nil {
		return err
	}
	timeout := c.srv.cfg.SendTimeout
	held := -1 // bytes the socket held when the wait began or last moved; -1: unknown
	if timeout > 0 {
		if err := c.dup.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
			return err
		}
		held, _ = unacked(rc)
	}
	c.waiting.Store(true)
	c.srv.stats.writeWaits.Add(1)
	go func() {
		for {
			// Returning false waits for the next readiness event; poll tells the truth
			// (readiness reported earlier may already be consumed).
			err := rc.Write(func(fd uintptr) bool { return writable(int(fd)) })
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			now, open := unacked(rc)
			if !open {
				break // shut down meanwhile (the loop closed the connection): not a timeout
			}
			if now >= 0 && now < held {
				held = now // the client read meanwhile: wait another timeout from here
				if c.dup.SetWriteDeadline(time.Now().Add(timeout)) == nil {
					continue
				}
			}
			c.srv.stats.sendTimedOut.Add(1)
			c.srv.cfg.Logger.Info("closing a connection whose socket took nothing for the send timeout: its client stopped reading",
				"remote", c.RemoteAddr(), "send_timeout", timeout)
			c.closeAsked.Store(true) // the loop closes it (only the loop may), releasing its answers
			break
		}
		c.waiting.Store(false)
		c.wake()
	}()
	return nil
}

// unacked returns the bytes the socket holds that its peer has not acknowledged
// (SIOCOUTQ), or -1 when it cannot tell; open is false once the connection's shutdown
// closed the descriptor.
func unacked(rc syscall.RawConn) (n int, open bool) {
	n = -1
	if err := rc.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.SIOCOUTQ); err == nil {
			n = v
		}
	}); err != nil {
		return -1, false
	}
	return n, true
}

func writable(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	for {
		n, err := unix.Poll(fds, 0)
		if err == unix.EINTR {
			continue
		}
		return err != nil || (n > 0 && fds[0].Revents&(unix.POLLOUT|unix.POLLERR|unix.POLLHUP) != 0)
	}
}

// isConnReset reports errors that just mean the peer went away.
func isConnReset(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}
