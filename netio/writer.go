package netio

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxSendfile bounds one sendfile call: a connection sending a large region gives its
// loop back to the other connections every MiB.
const maxSendfile = 1 << 20

// errBlocked says the socket buffer is full; writing resumes when it drains.
var errBlocked = errors.New("socket not writable")

// flush writes ready responses from the head of the queue until the queue is empty, the
// head is not ready, or the socket is full. Loop only. A write error closes the
// connection.
func (c *Conn) flush() error {
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
		if err := c.writeResponse(&s.resp); err != nil {
			if errors.Is(err, errBlocked) {
				return c.waitWritable()
			}
			return err
		}
		c.mu.Lock()
		c.mu.queue[0] = nil
		c.mu.queue = c.mu.queue[1:]
		c.unchargeLocked(s)
		c.mu.Unlock()
		c.started, c.fileSent = false, 0
		if s.resp.Done != nil {
			s.resp.Done()
		}
		if s.resp.Close {
			return errClosing
		}
	}
}

// errClosing asks the loop to close the connection after a fatal error was answered.
var errClosing = errors.New("closing after a fatal protocol error")

// writeResponse writes (the rest of) one response: bytes by writev, then the file region
// by sendfile. It returns errBlocked when the socket is full.
func (c *Conn) writeResponse(r *Response) error {
	fd := c.gc.Fd()
	if !c.started {
		c.iov = append(append(c.iov[:0], r.Head), r.Iov...)
		c.started = true
	}
	for len(c.iov) > 0 {
		n, err := unix.Writev(fd, c.iov)
		if n > 0 {
			c.srv.stats.bytesCopied.Add(uint64(n))
			c.iov = advance(c.iov, n)
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
	}
	for c.fileSent < r.Len {
		off := r.Pos + c.fileSent
		n, err := unix.Sendfile(fd, r.File, &off, int(min(r.Len-c.fileSent, maxSendfile)))
		if n > 0 {
			c.fileSent += int64(n)
			c.srv.stats.bytesSendfile.Add(uint64(n))
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
		if n == 0 {
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
// wakes the loop. Loop only.
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
	c.waiting.Store(true)
	c.srv.stats.writeWaits.Add(1)
	go func() {
		// Returning false waits for the next readiness event; poll tells the truth
		// (readiness reported earlier may already be consumed).
		rc.Write(func(fd uintptr) bool { return writable(int(fd)) })
		c.waiting.Store(false)
		c.wake()
	}()
	return nil
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
