package netio

import (
	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"sluice/wire"
)

// Reading past gnet. gnet reads at most its read buffer per readable event and calls
// OnTraffic with it; what netio cannot hand over in place (a frame the read cut) it must
// copy into the connection's inbuf before gnet reuses that buffer. Over loopback a
// segment is at most 64 KiB, so with gnet's default 64 KiB buffer a 1 MiB produce frame
// arrived in about sixteen reads and was copied twice in user space: piece by piece into
// the inbuf, then by the handler into the arena.
//
// So gnet's read is kept at its smallest (gnetReadCap) and, when that read filled it (the
// socket may hold more), the connection reads the rest itself with read(2), straight into
// its inbuf: the remainder of the partial frame up to its end (its header first, so that
// a frame is still refused from its header before its body is read), or, between frames,
// up to readAhead bytes, so that pipelined small requests still arrive 64 KiB per read.
// Those bytes are the kernel's copy, as gnet's own read is; only the first piece of each
// readable event (at most gnetReadCap bytes) is copied in user space on its way to the
// inbuf. A produced byte is then copied once in user space, into the arena, give or take
// 1 KiB per readable event (Stats.BytesHeld counts that piece, Stats.BytesReceived what
// netio read itself).
//
// A read that returns an error or end of stream is left to gnet: the socket stays
// readable (level-triggered epoll), gnet's next read sees the same and closes the
// connection as it always does. The budget applies as to every byte held: room is made
// and charged before the read, and when the budget will not take it netio reads nothing
// itself (gnet's next read brings the bytes, and the reader refuses the connection as
// before). A connection taking no requests reads no further ahead than gnet makes it.
const (
	gnetReadCap = 1 << 10  // gnet's smallest read buffer
	readAhead   = 64 << 10 // what a connection reads ahead between frames
)

// readMore reads from the socket into the inbuf, once per readable event, and hands over
// the frames that completes. Loop only.
func (c *Conn) readMore(fd int) gnet.Action {
	for pass := 0; pass < 2; pass++ { // the partial frame's header, then its body
		b := &c.in
		var want int
		switch {
		case b.partial() && b.next > 0 && b.len()-b.whole < wire.RequestHeaderSize:
			want = b.whole + wire.RequestHeaderSize
		case b.partial() && b.next > 0:
			want = b.whole + b.next
		case pass > 0 || c.paused:
			return c.read(nil)
		default:
			want = b.len() + readAhead
		}
		if c.receive(fd, want) == 0 {
			return c.read(nil)
		}
		if action := c.took(); action != gnet.None || c.closeNext {
			return action
		}
		if c.in.len() < want { // a short read: the socket is empty
			break
		}
	}
	return c.read(nil)
}

// receive reads from the socket into the inbuf until it holds want bytes or a read comes
// back short, and returns the bytes read. It reads nothing when the inbound budget will
// not take want bytes. The pages the read may fill are charged before it; those it did
// not fill are given back after it, so that a read that found little (a read ahead
// between frames, typically) is charged for what it brought, not for what it asked.
func (c *Conn) receive(fd, want int) int {
	b := &c.in
	if c.room(want, b.len()) != admitted { // room for want bytes, charged for those held
		return 0
	}
	base := b.touched // resident before the read
	touched := max(base, b.r+want)
	charge := max(cost(len(b.mem), touched), c.reserved())
	if c.srv.inBudget.resize(c.held, charge) != admitted {
		if b.len() == 0 {
			c.dropInbound()
		}
		return 0
	}
	c.held, b.touched = charge, touched
	got := 0
	for b.len() < want {
		dst := b.mem[b.w : b.r+want]
		n, err := unix.Read(fd, dst)
		if n <= 0 {
			if err == unix.EINTR {
				continue
			}
			break // EAGAIN, end of stream or an error: see the comment above
		}
		b.w += n
		got += n
		if n < len(dst) {
			break
		}
	}
	if b.len() == 0 {
		c.dropInbound() // nothing came: an idle connection holds no buffer
	} else {
		b.touched = max(base, b.w) // what the read wrote, and no further
		c.recharge()
	}
	if got > 0 {
		c.reads++
		c.srv.stats.bytesReceived.Add(uint64(got))
	}
	return got
}
