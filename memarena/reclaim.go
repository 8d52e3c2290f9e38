package memarena

import (
	"sync"
	"sync/atomic"
)

// owner is what the reclaimer takes chunks from: a WriteBuffer or a
// BlockCache. The ...Locked methods need the owner's lock.
type owner interface {
	state() *ownerState
	tryLock() bool
	unlock()
	// candidateLocked says whether the owner can give up a chunk now and the
	// logical time that chunk was last used (read, written or cached).
	candidateLocked(force bool) (stamp uint64, c candidate)
	// reclaimOneLocked gives up that chunk and reports whether it went back
	// to the free stack (false: a reader still holds it).
	reclaimOneLocked() bool
}

// candidate is an owner's answer to the reclaimer.
type candidate uint8

const (
	candNone  candidate = iota // nothing reclaimable: leave the queue
	candHeld                   // reclaimable, but only when forced (PartitionMin)
	candReady                  // reclaimable now
)

// ownerState is the part of an owner the arena keeps.
type ownerState struct {
	id uint32
	// queued is true while the owner is in the reclaim heap or the incoming
	// list; it changes only under the owner's lock.
	queued atomic.Bool
}

// reclaimer is the victim queue: a min-heap of owners keyed by a lower bound
// of the stamp of the chunk each would give up next. Keys are corrected
// lazily: the top's real stamp is read under its lock, and if it grew (the
// chunk was read since) the key is raised and the heap fixed. Since a key
// never exceeds its owner's real stamp, the top whose real stamp is at most
// its key is the least recently used candidate of all. (Nearly: a buffer that
// drops its own oldest chunk, over PartitionMax, may expose an older stamp
// than its key; that chunk is then taken a little late.)
type reclaimer struct {
	mu    sync.Mutex
	heap  []heapEntry
	aside []heapEntry // skipped in this pass: busy
	held  []heapEntry // reclaimable only by force (PartitionMin); still queued
	spare []owner     // the incoming list's other buffer
}

type heapEntry struct {
	key uint64
	o   owner
}

// incoming holds owners that became reclaimable since the last pass. It has
// its own small lock so that owners never wait for a reclaim pass.
type incoming struct {
	mu   sync.Mutex
	list []owner
}

// pass says how much one reclaim pass is after: it is done when it has
// taken target bytes from owners and minFreed of them are back on the free
// stacks (a reader may still hold a chunk its owner gave up).
type pass struct {
	target, minFreed int64
	force            bool // ignore PartitionMin
}

func (p pass) done(detached, freed int64) bool {
	return detached >= p.target && freed >= p.minFreed
}

// Reclaim frees memory up to the high watermark, least recently used first,
// and gives idle slabs back to the OS. A background driver may call it now
// and then; allocations reclaim by themselves too. It returns the bytes taken
// from owners.
func (a *Arena) Reclaim() int64 {
	a.rc.mu.Lock()
	a.rc.mergeHeld()
	detached, _ := a.reclaimLocked(nil, pass{target: a.highFree - a.freeBytes()})
	a.rc.mu.Unlock()
	a.sweepIdleSlabs()
	return detached
}

// enqueueLocked makes o a reclaim candidate. The caller holds o's lock.
func (a *Arena) enqueueLocked(o owner) {
	st := o.state()
	if st.queued.Load() {
		return
	}
	st.queued.Store(true)
	a.incoming.mu.Lock()
	a.incoming.list = append(a.incoming.list, o)
	a.incoming.mu.Unlock()
}

// reclaimSoft runs after an allocation left free memory below the low
// watermark: a bounded pass toward the high watermark, skipped if another
// goroutine is reclaiming already.
func (a *Arena) reclaimSoft(self owner) {
	if !a.rc.mu.TryLock() {
		return
	}
	defer a.rc.mu.Unlock()
	if target := min(a.highFree-a.freeBytes(), a.syncMax); target > 0 {
		a.reclaimLocked(self, pass{target: target})
	}
}

// reclaimHard runs when no chunk is free. It waits for a pass in progress
// (bounded work), then reclaims toward the high watermark (bounded too) until
// at least one chunk is back, honouring PartitionMin first and ignoring it if
// it must. Owners held back by PartitionMin are looked at again only here and
// in Reclaim, so an arena whose minimums add up to more than its size does
// not make every allocation walk them all.
func (a *Arena) reclaimHard(self owner) {
	a.rc.mu.Lock()
	defer a.rc.mu.Unlock()
	a.rc.mergeHeld()
	p := pass{target: max(a.chunkSize, min(a.highFree-a.freeBytes(), a.syncMax)), minFreed: a.chunkSize}
	if _, freed := a.reclaimLocked(self, p); freed == 0 {
		a.rc.mergeHeld()
		p.force = true
		a.reclaimLocked(self, p)
	}
}

// reclaimLocked takes chunks from owners, least recently used first, until p
// is done or no candidate is left. Owners are only try-locked (except self,
// whose lock the caller holds), so a pass never waits for an owner.
func (a *Arena) reclaimLocked(self owner, p pass) (detached, freed int64) {
	a.drainIncomingLocked()
	r := &a.rc
	a.c.reclaimPasses.Add(1)
	// A step that reclaims nothing drops, holds or sets aside an entry, or
	// raises a key to its real stamp; the budget bounds those steps in the
	// rare case of stamps that keep rising under concurrent reads.
	budget := 4*len(r.heap) + 16
	for len(r.heap) > 0 && !p.done(detached, freed) && budget > 0 {
		o := r.heap[0].o
		if o != self && !o.tryLock() {
			r.setAside()
			budget--
			continue
		}
		d, f := a.visitTopLocked(o, p.force)
		if o != self {
			o.unlock()
		}
		if d == 0 {
			budget--
		}
		detached, freed = detached+d, freed+f
	}
	r.restoreAside()
	a.c.reclaimed.Add(detached)
	return detached, freed
}

// visitTopLocked deals with the heap's top entry, whose owner o is locked:
// reclaim one chunk if it is the least recently used, then re-key or drop it.
func (a *Arena) visitTopLocked(o owner, force bool) (detached, freed int64) {
	r := &a.rc
	stamp, c := o.candidateLocked(force)
	if c == candReady && stamp <= r.heap[0].key {
		detached = a.chunkSize
		if o.reclaimOneLocked() {
			freed = a.chunkSize
		}
		stamp, c = o.candidateLocked(force)
	}
	switch c {
	case candNone:
		o.state().queued.Store(false)
		r.popTop()
	case candHeld:
		r.held = append(r.held, heapEntry{key: stamp, o: o})
		r.popTop()
	default:
		r.heap[0].key = stamp
		r.down(0)
	}
	return detached, freed
}

// drainIncomingLocked moves new candidates into the heap with key 0, a valid
// lower bound that the first visit corrects.
func (a *Arena) drainIncomingLocked() {
	r, in := &a.rc, &a.incoming
	in.mu.Lock()
	list := in.list
	in.list = r.spare
	in.mu.Unlock()
	for _, o := range list {
		r.push(heapEntry{o: o})
	}
	clear(list)
	r.spare = list[:0]
}

func (r *reclaimer) setAside() {
	r.aside = append(r.aside, r.heap[0])
	r.popTop()
}

// mergeHeld puts the owners held back by PartitionMin into the heap again.
func (r *reclaimer) mergeHeld() {
	for i, e := range r.held {
		r.push(e)
		r.held[i] = heapEntry{}
	}
	r.held = r.held[:0]
}

func (r *reclaimer) restoreAside() {
	for i, e := range r.aside {
		r.push(e)
		r.aside[i] = heapEntry{}
	}
	r.aside = r.aside[:0]
}

func (r *reclaimer) push(e heapEntry) {
	r.heap = append(r.heap, e)
	r.up(len(r.heap) - 1)
}

func (r *reclaimer) popTop() {
	n := len(r.heap) - 1
	r.heap[0] = r.heap[n]
	r.heap[n] = heapEntry{}
	r.heap = r.heap[:n]
	if n > 0 {
		r.down(0)
	}
}

func (r *reclaimer) up(i int) {
	h := r.heap
	for i > 0 {
		p := (i - 1) / 2
		if h[p].key <= h[i].key {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func (r *reclaimer) down(i int) {
	h := r.heap
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].key < h[l].key {
			m = r
		}
		if h[i].key <= h[m].key {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
