package local

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"

	"sluice/persist/vfs"
)

// FilePool bounds the read descriptors that segments keep open, across every log that
// shares it (normally every log of the process: see Options.Files). A segment's file is
// opened read-only when a read needs it and closed when the pool evicts it; the one
// descriptor each log writes its active segment through stays outside the pool.
//
// Eviction never closes a descriptor in use: every user (a Region, a lookup, an fsync)
// holds a reference to the descriptor's handle, and eviction only drops the segment's
// own reference, so the descriptor closes when the last user releases it. The pool picks
// victims with the CLOCK approximation of least-recently-used: a use marks the handle
// (an atomic store, no lock), and the sweep gives a marked handle a second chance.
//
// The pool keeps at most its limit of descriptors open, except while more than the limit
// are in use at once: it never waits for a user and never refuses one.
//
// Lock order: FilePool.mu is a leaf, taken after Log.mu when a log drops a segment, held
// only for list operations (never across I/O or another lock). Eviction takes no Log
// lock: it swaps the segment's atomic handle pointer and drops a reference.
type FilePool struct {
	limit int
	// open counts descriptors opened through the pool and not yet closed, evicted ones
	// still in use included.
	open atomic.Int64

	mu struct {
		sync.Mutex
		hand *handle // the clock hand into the ring of handles installed in segments
		n    int     // handles in the ring
	}
}

// NewFilePool returns a pool that keeps at most limit segment files open for reading.
func NewFilePool(limit int) *FilePool {
	if limit < 1 {
		panic(fmt.Sprintf("BUG: file pool limit %d", limit))
	}
	return &FilePool{limit: limit}
}

// FilePoolLimit returns a pool limit for this process: a quarter of its soft
// RLIMIT_NOFILE (Go raises the soft limit to the hard one at start-up), at least 16. The
// other three quarters are left to what the pool does not count: one write descriptor per
// partition, index files being read, sockets.
func FilePoolLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 256
	}
	return int(max(16, min(rl.Cur/4, 1<<20)))
}

// Limit returns the number of descriptors the pool keeps open at most.
func (p *FilePool) Limit() int { return p.limit }

// Open returns the number of descriptors currently open through the pool.
func (p *FilePool) Open() int { return int(p.open.Load()) }

// opened counts a descriptor the pool is about to hand out (before it is installed, so
// that a racing close is never counted before its open).
func (p *FilePool) opened(h *handle) {
	h.pool.Store(p)
	p.open.Add(1)
}

// insert puts h into the ring and evicts idle handles while the pool is over its limit.
func (p *FilePool) insert(h *handle) {
	p.mu.Lock()
	if !h.inRing {
		if p.mu.hand == nil {
			h.prev, h.next = h, h
			p.mu.hand = h
		} else { // just behind the hand: the last to be considered
			h.prev, h.next = p.mu.hand.prev, p.mu.hand
			h.prev.next, h.next.prev = h, h
		}
		h.inRing = true
		p.mu.n++
	}
	p.mu.Unlock()
	for p.open.Load() > int64(p.limit) {
		p.mu.Lock()
		v := p.victimLocked(h)
		p.mu.Unlock()
		if v == nil {
			return // everything else is in use
		}
		v.evict()
	}
}

// remove takes h out of the ring (its segment was dropped).
func (p *FilePool) remove(h *handle) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unlinkLocked(h)
}

func (p *FilePool) unlinkLocked(h *handle) {
	if !h.inRing {
		return
	}
	if h.next == h {
		p.mu.hand = nil
	} else {
		h.prev.next, h.next.prev = h.next, h.prev
		if p.mu.hand == h {
			p.mu.hand = h.next
		}
	}
	h.prev, h.next, h.inRing = nil, nil, false
	p.mu.n--
}

// victimLocked moves the clock hand to the first idle, unmarked handle other than keep
// and takes it out of the ring; nil when a full sweep finds none. Stale handles (whose
// segment has dropped or replaced them) are taken out on the way.
func (p *FilePool) victimLocked(keep *handle) *handle {
	for steps := 2 * p.mu.n; p.mu.hand != nil && steps > 0; steps-- {
		c := p.mu.hand
		p.mu.hand = c.next
		switch {
		case c == keep:
		case c.seg.h.Load() != c:
			p.unlinkLocked(c)
		case c.refs.Load() > 1: // in use
		case c.used.Swap(false): // second chance
		default:
			p.unlinkLocked(c)
			return c
		}
	}
	return nil
}

// handle is one open descriptor of a segment file, reference-counted: the segment holds
// one reference while the handle is its current one, and every user (a Region, a lookup,
// an fsync) one more. The descriptor is closed when the count reaches zero, never
// earlier: a user may be in the middle of a sendfile on it. Nothing relies on finalizers.
type handle struct {
	f    vfs.File
	seg  *segment
	refs atomic.Int32
	used atomic.Bool              // set by every use; cleared by the pool's sweep
	pool atomic.Pointer[FilePool] // set once the descriptor counts against a pool

	// Guarded by FilePool.mu.
	prev, next *handle
	inRing     bool
}

func newHandle(f vfs.File, seg *segment, refs int32) *handle {
	h := &handle{f: f, seg: seg}
	h.refs.Store(refs)
	return h
}

// tryAcquire adds a reference unless the count has reached zero (the descriptor is
// closed or closing).
func (h *handle) tryAcquire() bool {
	for {
		n := h.refs.Load()
		if n <= 0 {
			return false
		}
		if h.refs.CompareAndSwap(n, n+1) {
			h.used.Store(true)
			return true
		}
	}
}

// Release drops a reference (persist.Releaser: a Region holds one).
func (h *handle) Release() { h.release() }

// release drops a reference and closes the descriptor with the last one.
func (h *handle) release() {
	n := h.refs.Add(-1)
	if n < 0 {
		panic(fmt.Sprintf("BUG: handle of segment %s released more often than acquired", h.seg.path))
	}
	if n == 0 {
		h.f.Close()
		h.seg.files.Add(-1) // after the close: the file may be reused from here on
		if p := h.pool.Load(); p != nil {
			p.open.Add(-1)
		}
	}
}

// evict detaches h from its segment if it is still the segment's handle, dropping the
// segment's reference.
func (h *handle) evict() {
	if h.seg.h.CompareAndSwap(h, nil) {
		h.release()
	}
}
