package netio

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync"

	"golang.org/x/sys/unix"
)

// Inbound buffers. gnet reads what a readable event brings into its loop's read buffer
// (1 KiB: receive.go reads the rest itself, into the inbuf) and calls OnTraffic; anything OnTraffic leaves unconsumed it copies into the
// connection's ring buffer, which grows by doubling and goes back to a process-wide
// sync.Pool when the connection closes (a 60 MiB frame left a 128 MiB ring there). So
// netio consumes every byte gnet read, every time: whole frames are handed to the handler
// in place, and the rest (a partial frame, and what arrives while the connection may take
// no more requests) is copied into the connection's inbuf, memory netio maps itself,
// charges to the broker-wide budget and unmaps or pools under a bound of its own.

// Buffer classes: mappings of 64 KiB to 8 MiB, powers of two, are pooled (already faulted
// in, so reusing them costs no page faults: a produce frame larger than gnet's read
// buffer passes through one on every request); larger ones are mapped at the frame's size
// and unmapped as soon as the frame is handed over.
const (
	minClassShift = 16 // 64 KiB
	maxClassShift = 23 // 8 MiB
	numClasses    = maxClassShift - minClassShift + 1
	pageSize      = 4 << 10
	hugePage      = 2 << 20
)

// mapping is an inbound buffer with its high-water mark: the pages of mem[:touched] were
// written, so they are resident.
type mapping struct {
	mem     []byte
	touched int
}

// cost returns what the budget charges for a mapping whose first touched bytes were
// written: those pages, rounded to the page size (to 2 MiB for a large mapping, which
// may be backed by huge pages).
func cost(size, touched int) int64 {
	unit := pageSize
	if size > 1<<maxClassShift {
		unit = hugePage
	}
	return int64(min((touched+unit-1)&^(unit-1), size))
}

// bufPool maps, pools and unmaps inbound buffers. The pool keeps at most retain bytes of
// idle mappings; beyond that a released mapping is unmapped at once, so RSS falls as soon
// as a connection closes. Safe for concurrent use (every event loop shares it); its lock
// is a leaf.
type bufPool struct {
	retain int64
	mu     struct {
		sync.Mutex
		free   [numClasses][]mapping
		idle   int64 // bytes mapped in free
		closed bool
	}
}

// classOf returns the class index of a buffer of at least n bytes, or -1 when n is above
// the largest class.
func classOf(n int) int {
	if n <= 1<<minClassShift {
		return 0
	}
	shift := bits.Len(uint(n - 1))
	if shift > maxClassShift {
		return -1
	}
	return shift - minClassShift
}

// get returns a mapping of at least n bytes. It touches no memory: a pooled mapping is
// resident already (counted as idle), a new one is not until written.
func (p *bufPool) get(n int) (mapping, error) {
	k := classOf(n)
	if k >= 0 {
		p.mu.Lock()
		if f := p.mu.free[k]; len(f) > 0 {
			m := f[len(f)-1]
			f[len(f)-1] = mapping{}
			p.mu.free[k] = f[:len(f)-1]
			p.mu.idle -= int64(len(m.mem))
			p.mu.Unlock()
			return m, nil
		}
		p.mu.Unlock()
		n = 1 << (k + minClassShift)
	} else {
		n = (n + hugePage - 1) &^ (hugePage - 1)
	}
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return mapping{}, fmt.Errorf("cannot map an inbound buffer of %d bytes: %w", n, err)
	}
	if k < 0 {
		_ = unix.Madvise(mem, unix.MADV_HUGEPAGE) // 4x faster first touch while a big frame arrives
	}
	return mapping{mem: mem}, nil
}

// put releases a mapping from get: pooled if it is of a class size and the pool has room,
// unmapped otherwise.
func (p *bufPool) put(m mapping) {
	if k := classOf(len(m.mem)); k >= 0 {
		p.mu.Lock()
		if !p.mu.closed && p.mu.idle+int64(len(m.mem)) <= p.retain {
			p.mu.free[k] = append(p.mu.free[k], m)
			p.mu.idle += int64(len(m.mem))
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
	if err := unix.Munmap(m.mem); err != nil {
		panic(fmt.Sprintf("BUG: netio: munmap of an inbound buffer: %v", err))
	}
}

// idle returns the bytes of idle mappings the pool keeps.
func (p *bufPool) idle() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.idle
}

// close unmaps every idle mapping; later puts unmap at once.
func (p *bufPool) close() {
	p.mu.Lock()
	free := p.mu.free
	p.mu.free = [numClasses][]mapping{}
	p.mu.idle, p.mu.closed = 0, true
	p.mu.Unlock()
	for _, f := range free {
		for _, m := range f {
			p.put(m)
		}
	}
}

// inbuf holds the bytes of one connection that were read but not yet handed to the
// handler: mem[r:w]. mem[r:r+whole] are whole frames whose headers were checked; a
// partial frame may follow, next bytes long once its length field is held (0 before).
// Loop only.
type inbuf struct {
	mapping     // nil mem when nothing is held
	r, w        int
	whole, next int
}

// len returns the number of bytes held.
func (b *inbuf) len() int { return b.w - b.r }

// bytes returns the bytes held.
func (b *inbuf) bytes() []byte { return b.mem[b.r:b.w] }

// partial reports whether the bytes held end inside a frame.
func (b *inbuf) partial() bool { return b.whole < b.len() }

// missing returns how many more bytes the partial frame at the head needs to be whole (to
// show its length first, when fewer than 4 bytes of it are held). Only when no whole
// frame is held.
func (b *inbuf) missing() int {
	if b.next == 0 {
		return 4 - b.len()
	}
	return b.next - b.len()
}

// headSize returns the size of the whole frame at the head.
func (b *inbuf) headSize() int { return int(binary.LittleEndian.Uint32(b.mem[b.r:])) + 4 }

// growth is how an inbuf makes room: in place (moving the bytes held to the front when
// the room is there), in a fresh mapping the bytes held are copied to, or by remapping the
// current mapping larger (mremap moves its pages, so a backlog of 100 MiB grows without
// copying it or holding it twice).
type growth struct {
	kind    growKind
	compact bool    // growInPlace: move the bytes held to the front first
	m       mapping // the fresh mapping, for growFresh
	size    int     // the mapping's size after
	touched int     // its high-water mark after
}

type growKind uint8

const (
	growInPlace growKind = iota
	growFresh
	growRemap
)

// remapAbove is the size above which a growing buffer is remapped rather than copied.
const remapAbove = 1 << maxClassShift

// plan returns how the buffer would make room for capacity bytes held, fill of them
// written, without changing anything but perhaps taking a fresh mapping from the pool
// (give it back with abandon). A buffer that has to grow at least doubles, so a backlog
// growing by reads is moved O(log n) times.
func (b *inbuf) plan(pool *bufPool, capacity, fill int) (growth, error) {
	if capacity <= len(b.mem) {
		g := growth{kind: growInPlace, compact: b.r+capacity > len(b.mem), size: len(b.mem)}
		if g.compact {
			g.touched = max(b.touched, fill)
		} else {
			g.touched = max(b.touched, b.r+fill)
		}
		return g, nil
	}
	want := capacity
	if b.mem != nil {
		want = max(capacity, 2*len(b.mem))
	}
	if b.mem != nil && want > remapAbove {
		size := (b.r + want + hugePage - 1) &^ (hugePage - 1)
		return growth{kind: growRemap, size: size, touched: max(b.touched, b.r+fill)}, nil
	}
	m, err := pool.get(want)
	if err != nil {
		return growth{}, err
	}
	return growth{kind: growFresh, m: m, size: len(m.mem), touched: max(m.touched, fill)}, nil
}

// shed moves the bytes held to the front of the mapping and gives the pages past them
// back to the kernel (MADV_DONTNEED), so that pages a consumed front left resident stop
// counting: the charge is then what the buffer holds. It copies the bytes held, so the
// reader calls it only when the budget would refuse otherwise.
func (b *inbuf) shed() {
	if b.mem == nil {
		return
	}
	n := b.len()
	if b.r > 0 {
		copy(b.mem, b.mem[b.r:b.w])
		b.r, b.w = 0, n
	}
	unit := pageSize
	if len(b.mem) > 1<<maxClassShift {
		unit = hugePage
	}
	if from := (n + unit - 1) &^ (unit - 1); from < b.touched {
		_ = unix.Madvise(b.mem[from:b.touched], unix.MADV_DONTNEED) // advice: the charge follows touched
		b.touched = from
	}
}

// abandon gives back what plan took for a growth that will not be applied.
func (b *inbuf) abandon(pool *bufPool, g growth) {
	if g.kind == growFresh {
		pool.put(g.m)
	}
}

// apply makes the room plan planned.
func (b *inbuf) apply(pool *bufPool, g growth) error {
	n := b.len()
	switch g.kind {
	case growFresh:
		copy(g.m.mem, b.mem[b.r:b.w])
		if b.mem != nil {
			pool.put(b.mapping)
		}
		b.mapping = g.m
		b.r, b.w = 0, n
	case growRemap:
		mem, err := unix.Mremap(b.mem, g.size, unix.MREMAP_MAYMOVE)
		if err != nil {
			return fmt.Errorf("cannot grow an inbound buffer to %d bytes: %w", g.size, err)
		}
		_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
		b.mem = mem
	case growInPlace:
		if g.compact {
			copy(b.mem, b.mem[b.r:b.w])
			b.r, b.w = 0, n
		}
	}
	b.touched = g.touched
	return nil
}

// consume drops n bytes of whole frames from the front, and gives the mapping back once
// nothing is held.
func (b *inbuf) consume(pool *bufPool, n int) {
	if n > b.whole {
		panic(fmt.Sprintf("BUG: netio: consuming %d bytes of %d whole", n, b.whole))
	}
	b.r += n
	b.whole -= n
	if b.r == b.w {
		b.release(pool)
	}
}

// release gives the mapping back and forgets everything held.
func (b *inbuf) release(pool *bufPool) {
	if b.mem != nil {
		pool.put(b.mapping)
	}
	*b = inbuf{}
}
