package memarena

import (
	"fmt"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// chunkMeta is the Go-heap metadata of one chunk; arena memory holds only
// message bytes. refs and next are atomics. gen, owner and stamp are plain:
// each is written only by a goroutine that has the chunk to itself (it just
// popped it, or is dropping the last reference) or that holds the lock of
// the owner whose chain holds the chunk, and read under that lock or while
// holding a reference; the free stack's CAS, the reference count and the
// owner locks order those accesses.
type chunkMeta struct {
	refs  atomic.Int32  // the owner's reference plus one per Span; 0 or 1 when free
	next  atomic.Uint32 // free stack link: local index+1 of the next, 0 = end
	gen   uint32        // bumped on allocation (odd: in use) and on free (even)
	owner uint32        // owner id while owned, 0 otherwise
	stamp uint64        // logical time of last use, for least-recently-read
}

// slab is one mmap'd region, mapped on first need, and the free stack of its
// chunks. Its mem and meta are set once, under Arena.slabMu, before
// Arena.mapped publishes the slab.
type slab struct {
	head atomic.Uint64 // free stack: tag<<32 | (local index + 1); 0 = empty
	_    [56]byte      // keep the hot head off the line holding mem and meta
	mem  []byte
	meta []chunkMeta

	// cold: given back with MADV_DONTNEED and no chunk handed out since. Set
	// by the sweeper while it holds every chunk; cleared by the allocation
	// that takes the first chunk.
	cold atomic.Bool

	// Sweeper state, under Arena.slabMu.
	idleSweeps int // consecutive sweeps that found every chunk free
}

// pop takes a free chunk, returning its local index. Lock-free (a Treiber
// stack); the tag in the head's top half defeats ABA.
func (s *slab) pop() (uint32, bool) {
	for {
		h := s.head.Load()
		top := uint32(h)
		if top == 0 {
			return 0, false
		}
		next := s.meta[top-1].next.Load()
		if s.head.CompareAndSwap(h, (h>>32+1)<<32|uint64(next)) {
			return top - 1, true
		}
	}
}

// push returns the chunk with local index i to the free stack. A chunk
// released right after it was allocated usually has its link right already,
// and an atomic store costs as much as the CAS, so it is skipped then.
func (s *slab) push(i uint32) {
	m := &s.meta[i]
	for {
		h := s.head.Load()
		if m.next.Load() != uint32(h) {
			m.next.Store(uint32(h))
		}
		if s.head.CompareAndSwap(h, (h>>32+1)<<32|uint64(i+1)) {
			return
		}
	}
}

// stealAll empties the free stack and returns how many chunks it held and
// the old head, so the caller can put them back with pushList.
func (s *slab) stealAll() (n int, list uint32) {
	for {
		h := s.head.Load()
		if s.head.CompareAndSwap(h, (h>>32+1)<<32) {
			list = uint32(h)
			break
		}
	}
	for i := list; i != 0; i = s.meta[i-1].next.Load() {
		n++
	}
	return n, list
}

// pushList puts back a list taken by stealAll.
func (s *slab) pushList(list uint32) {
	if list == 0 {
		return
	}
	tail := list
	for n := s.meta[tail-1].next.Load(); n != 0; n = s.meta[tail-1].next.Load() {
		tail = n
	}
	for {
		h := s.head.Load()
		s.meta[tail-1].next.Store(uint32(h))
		if s.head.CompareAndSwap(h, (h>>32+1)<<32|uint64(list)) {
			return
		}
	}
}

// freeCount counts the chunks on the free stack (a racy snapshot, bounded
// in case the stack changes under the walk).
func (s *slab) freeCount() int {
	n := 0
	for i := uint32(s.head.Load()); i != 0 && n <= len(s.meta); i = s.meta[i-1].next.Load() {
		n++
	}
	return n
}

// mapSlab maps slab i and fills its free stack. Caller holds a.slabMu.
func (a *Arena) mapSlab(i int) error {
	s := &a.slabs[i]
	n := a.slabChunks(i)
	mem, err := unix.Mmap(-1, 0, int(n*a.chunkSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		// The host is out of memory: throttle like a full arena, but say why.
		return fmt.Errorf("%w: cannot map arena slab of %s: %w", ErrFull, FormatSize(n*a.chunkSize), err)
	}
	// Transparent huge pages where the host allows them (best effort): the first write to
	// fresh arena memory then faults once per 2 MiB instead of once per 4 KiB, which
	// measured as the largest cost of appends into a new arena (memmove into faulting
	// pages ran at a fifth of the speed of a warm copy).
	if adviseHugePages {
		_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
	}
	s.mem = mem
	s.meta = make([]chunkMeta, n)
	for j := n - 1; j >= 0; j-- {
		s.push(uint32(j))
	}
	return nil
}

// adviseHugePages: tests turn it off to measure appends into 4 KiB pages.
var adviseHugePages = true

// slabChunks is the number of chunks in slab i (the last may be short).
func (a *Arena) slabChunks(i int) int64 {
	per := int64(1) << a.slabShift
	return min(per, a.nChunks-int64(i)*per)
}

// sweepIdleSlabs gives back, with MADV_DONTNEED, the pages of every slab
// whose chunks were all free at two sweeps in a row. The slab stays mapped
// (a slice may still point into it; DESIGN §7): its pages read as zeros and
// fault back in when used; allocation prefers warm slabs to it meanwhile.
// Nothing is given back while Config.Prefault is on. Returns the bytes given
// back.
func (a *Arena) sweepIdleSlabs() int64 {
	if a.cfg.Prefault {
		return 0
	}
	a.slabMu.Lock()
	defer a.slabMu.Unlock()
	var given int64
	for i := int(a.mapped.Load()) - 1; i >= 0; i-- {
		given += a.sweepSlabLocked(&a.slabs[i])
	}
	return given
}

func (a *Arena) sweepSlabLocked(s *slab) int64 {
	if s.freeCount() != len(s.meta) {
		s.idleSweeps = 0
		return 0
	}
	if s.cold.Load() {
		return 0
	}
	if s.idleSweeps++; s.idleSweeps < 2 {
		return 0
	}
	// Take every chunk off the free stack so none is handed out while its
	// pages are dropped; put them back after.
	n, list := s.stealAll()
	defer s.pushList(list)
	if n != len(s.meta) {
		s.idleSweeps = 0
		return 0
	}
	if err := unix.Madvise(s.mem, unix.MADV_DONTNEED); err != nil {
		return 0 // the pages stay resident; nothing is lost
	}
	s.cold.Store(true)
	a.c.advisedBytes.Add(int64(len(s.mem)))
	a.c.slabsAdvised.Add(1)
	return int64(len(s.mem))
}

// unmapAll unmaps every slab. Caller guarantees no chunk is referenced.
func (a *Arena) unmapAll() {
	a.slabMu.Lock()
	defer a.slabMu.Unlock()
	for i := range int(a.mapped.Load()) {
		s := &a.slabs[i]
		_ = unix.Munmap(s.mem) // the mapping is ours; failure leaves it mapped
		s.mem, s.meta = nil, nil
	}
	a.mapped.Store(0)
}
