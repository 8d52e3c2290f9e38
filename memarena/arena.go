package memarena

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Arena is one host's message memory: Size bytes of off-heap slabs cut into
// chunks, drawn on by write buffers and block caches and reclaimed across
// them. All methods are safe for concurrent use, except Close.
type Arena struct {
	cfg        Config
	chunkSize  int64
	chunkShift uint
	slabShift  uint  // chunks per slab = 1 << slabShift
	nChunks    int64 // Size / ChunkSize
	lowFree    int64 // allocations reclaim while free bytes are below this
	highFree   int64 // ... up to this
	syncMax    int64 // most bytes one allocation reclaims before returning

	slabs  []slab
	mapped atomic.Int32 // slabs[:mapped] are mapped, in order
	hint   atomic.Int32 // a low slab that likely has free chunks
	slabMu sync.Mutex   // mapping, sweeping and unmapping slabs

	allocs atomic.Uint64 // chunks handed out ever; doubles as the logical clock
	_      [56]byte
	frees  atomic.Uint64 // chunks returned ever
	_      [56]byte

	rc          reclaimer
	incoming    incoming
	pf          prefaulter
	indexGroups sync.Pool // *indexGroup of full size, for write buffer indexes
	holds       holdSet   // live spans, under invariants only
	ownerIDs    atomic.Uint32
	closed      atomic.Bool
	c           counters
}

// counters feed Stats.
type counters struct {
	writeBufferBytes, blockCacheBytes atomic.Int64
	pending, reclaimed                atomic.Int64
	advisedBytes                      atomic.Int64
	writeBuffers, blockCaches         atomic.Int64
	reclaimPasses, slabsAdvised       atomic.Uint64
	fullErrors, badReleases           atomic.Uint64
	readHits, readMisses              atomic.Uint64
	cacheHits, cacheMisses            atomic.Uint64
}

// New validates cfg (after filling defaults) and returns an arena that has
// mapped nothing yet. With Config.Prefault it starts mapping and faulting in
// every slab in the background (see prefault.go).
func New(cfg Config) (*Arena, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Arena{
		cfg:        cfg,
		chunkSize:  cfg.ChunkSize,
		chunkShift: log2(cfg.ChunkSize),
		slabShift:  log2(cfg.SlabSize / cfg.ChunkSize),
		nChunks:    cfg.Size / cfg.ChunkSize,
	}
	a.lowFree = int64(cfg.LowWatermark * float64(cfg.Size))
	a.highFree = int64(cfg.HighWatermark * float64(cfg.Size))
	a.syncMax = max(16*a.chunkSize, min(a.highFree-a.lowFree, 256*a.chunkSize))
	a.slabs = make([]slab, (cfg.Size+cfg.SlabSize-1)/cfg.SlabSize)
	if cfg.Prefault {
		a.startPrefault()
	}
	return a, nil
}

// Config returns the arena's configuration, defaults filled in.
func (a *Arena) Config() Config { return a.cfg }

// Alloc returns a whole free chunk as a writable span, owned by no write
// buffer or cache (netio may read a request into it). The span must be
// released. It fails with ErrFull when nothing can be reclaimed.
func (a *Arena) Alloc() (Span, error) {
	if a.closed.Load() {
		return Span{}, ErrClosed
	}
	id, err := a.alloc(nil, 0)
	if err != nil {
		return Span{}, err
	}
	return a.spanOf(id, 0, a.chunkSize), nil
}

// Close unmaps the arena's memory. Every owner must be closed and every span
// released first; otherwise Close returns an error wrapping ErrBusy and
// leaves the memory mapped. Close must not run concurrently with other use.
func (a *Arena) Close() error {
	if n := a.c.writeBuffers.Load() + a.c.blockCaches.Load(); n > 0 {
		return fmt.Errorf("cannot close arena: %d owners open: %w", n, ErrBusy)
	}
	if used := a.usedChunks(); used > 0 {
		return fmt.Errorf("cannot close arena: %d chunks held by spans: %w", used, ErrBusy)
	}
	if a.closed.Swap(true) {
		return nil
	}
	a.stopPrefault()
	a.unmapAll()
	return nil
}

// alloc hands out a chunk with one reference, for the owner with id ownerID
// (0: none). self is the owner whose lock the caller holds, if any: the
// reclaimer may take chunks from it without locking it.
func (a *Arena) alloc(self owner, ownerID uint32) (uint32, error) {
	id, ok := a.pop()
	if !ok {
		var err error
		if id, err = a.allocSlow(self); err != nil {
			return 0, err
		}
	}
	a.initChunk(id, ownerID)
	if a.freeBytes() < a.lowFree {
		a.reclaimSoft(self)
	}
	return id, nil
}

// allocSlow maps a new slab, or else reclaims, to find a free chunk.
func (a *Arena) allocSlow(self owner) (uint32, error) {
	if id, ok, err := a.mapAndPop(); ok || err != nil {
		return id, err
	}
	a.reclaimHard(self)
	if id, ok := a.pop(); ok {
		return id, nil
	}
	a.c.fullErrors.Add(1)
	return 0, ErrFull
}

// pop takes a free chunk from the lowest mapped slab that has one, starting
// at the hint, so that high slabs drain and can be given back. Slabs given
// back to the OS (cold) come last: their pages fault in again when written,
// while a warm slab's free chunks cost nothing, and each slab's stack hands
// out its most recently freed chunk first. So a cold slab stays unused, and
// off the host's memory, until no warm chunk is free.
func (a *Arena) pop() (uint32, bool) {
	n, h := a.mapped.Load(), a.hint.Load()
	for i := h; i < n; i++ {
		if s := &a.slabs[i]; !s.cold.Load() {
			if j, ok := s.pop(); ok {
				if i != h {
					a.hint.Store(i)
				}
				return uint32(i)<<a.slabShift | j, true
			}
		}
	}
	for i := range min(h, n) {
		if s := &a.slabs[i]; !s.cold.Load() {
			if j, ok := s.pop(); ok {
				a.hint.Store(i)
				return uint32(i)<<a.slabShift | j, true
			}
		}
	}
	return a.popCold(n)
}

// popCold takes a chunk from the lowest slab that has one, cold or not (a
// slab may have turned warm since the caller looked), and marks its slab
// warm.
func (a *Arena) popCold(n int32) (uint32, bool) {
	for i := range n {
		s := &a.slabs[i]
		if j, ok := s.pop(); ok {
			if s.cold.Load() && s.cold.CompareAndSwap(true, false) {
				a.c.advisedBytes.Add(-int64(len(s.mem)))
			}
			a.hint.Store(i)
			return uint32(i)<<a.slabShift | j, true
		}
	}
	return 0, false
}

// mapAndPop maps the next slab, if any is left, and takes a chunk from it.
func (a *Arena) mapAndPop() (uint32, bool, error) {
	if int(a.mapped.Load()) == len(a.slabs) {
		return 0, false, nil
	}
	a.slabMu.Lock()
	defer a.slabMu.Unlock()
	if id, ok := a.pop(); ok { // another goroutine mapped one meanwhile
		return id, true, nil
	}
	i := a.mapped.Load()
	if int(i) == len(a.slabs) || a.closed.Load() {
		return 0, false, nil
	}
	if err := a.mapSlab(int(i)); err != nil {
		return 0, false, err
	}
	a.mapped.Store(i + 1)
	j, _ := a.slabs[i].pop()
	return uint32(i)<<a.slabShift | j, true, nil
}

// initChunk gives a just-popped chunk its first reference. A free chunk's
// reference count is 0 or 1 (see unref), so the store is usually skipped.
func (a *Arena) initChunk(id, ownerID uint32) {
	m := a.meta(id)
	if invariantsOn && m.gen&1 != 0 {
		panic(fmt.Sprintf("BUG: memarena: chunk %d on the free stack is in use", id))
	}
	m.gen++ // odd: in use
	if m.refs.Load() != 1 {
		m.refs.Store(1)
	}
	m.owner = ownerID
	m.stamp = a.allocs.Add(1)
}

// unref drops one reference to chunk id and frees the chunk on the last.
// It reports whether the chunk went back to the free stack. A holder that
// sees a count of 1 is the only one, and no one can take a new reference
// (that needs the chunk in an owner's chain, under the owner's lock), so it
// frees the chunk without an atomic write and leaves the count at 1.
func (a *Arena) unref(id uint32) bool {
	m := a.meta(id)
	if m.refs.Load() != 1 {
		n := m.refs.Add(-1)
		if n > 0 {
			return false
		}
		if n < 0 {
			m.refs.Add(1)
			a.badRelease("reference count of chunk %d below zero", id)
			return false
		}
	}
	if invariantsOn && m.gen&1 == 0 {
		panic(fmt.Sprintf("BUG: memarena: freeing free chunk %d", id))
	}
	m.gen++ // even: free; spans of the old generation are now stale
	m.owner = 0
	if invariantsOn {
		poison(a.chunkData(id))
	}
	a.frees.Add(1)
	si := int32(id >> a.slabShift)
	a.slabs[si].push(id & (1<<a.slabShift - 1))
	if si < a.hint.Load() {
		a.hint.Store(si)
	}
	return true
}

// ref adds a reference to a chunk the caller already holds one on (or whose
// owner's lock it holds).
func (a *Arena) ref(id uint32) { a.meta(id).refs.Add(1) }

func (a *Arena) meta(id uint32) *chunkMeta {
	return &a.slabs[id>>a.slabShift].meta[id&(1<<a.slabShift-1)]
}

// chunkData returns the whole chunk's memory.
func (a *Arena) chunkData(id uint32) []byte {
	off := int64(id&(1<<a.slabShift-1)) << a.chunkShift
	return a.slabs[id>>a.slabShift].mem[off : off+a.chunkSize : off+a.chunkSize]
}

// chunkFloor rounds stream position pos down to a multiple of the chunk
// size: where the chunk holding it starts.
func (a *Arena) chunkFloor(pos int64) int64 { return pos &^ (a.chunkSize - 1) }

// clock is the logical time used to order reads: the allocation count.
func (a *Arena) clock() uint64 { return a.allocs.Load() }

// usedChunks counts chunks with a reference. frees is read first so the
// result never goes negative.
func (a *Arena) usedChunks() int64 {
	f := a.frees.Load()
	return int64(a.allocs.Load() - f)
}

func (a *Arena) freeBytes() int64 { return a.cfg.Size - a.usedChunks()*a.chunkSize }

// badRelease reports a double or stale release: a panic under invariants,
// otherwise a count in Stats.BadReleases.
func (a *Arena) badRelease(format string, args ...any) {
	if invariantsOn {
		panic("BUG: memarena: " + fmt.Sprintf(format, args...))
	}
	a.c.badReleases.Add(1)
}

// poison fills freed memory so a use after free shows (invariants only).
func poison(b []byte) {
	for i := range b {
		b[i] = 0xdb
	}
}
