package memarena

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Prefault (Config.Prefault): the first write to fresh anonymous memory
// faults, once per 4 KiB page or once per 2 MiB huge page, and with 4 KiB
// pages that makes appends into a new arena several times slower than into
// warm memory (docs/memarena.md has the figures). A prefaulting arena maps
// every slab and faults its pages in on a goroutine of its own, low slabs
// first (the ones allocation prefers), right after New returns. Allocation
// never waits for it: one that needs a slab not mapped yet maps it as
// always, and a chunk may be in use while the prefaulter faults its pages
// in, which is safe because neither way of faulting changes a byte:
//
//   - madvise(MADV_POPULATE_WRITE) (Linux 5.14) faults pages in writable
//     without writing to them;
//   - where the kernel refuses that advice (EINVAL), the prefaulter adds 0
//     atomically to one word per page: a locked read-modify-write that leaves
//     whatever a concurrent append wrote there.
//
// The sweeper does not give idle slabs back while Prefault is on (that would
// undo the work), so a prefaulting arena keeps its whole Size resident.

// prefaultStep is how much the prefaulter faults in between two looks at
// the stop flag, so that Close does not wait long.
const prefaultStep = int(16 * MiB)

// populateAdvice is MADV_POPULATE_WRITE; tests set it to an advice the
// kernel refuses, to run the fallback.
var populateAdvice = unix.MADV_POPULATE_WRITE

// prefaulter is the state of the prefault goroutine.
type prefaulter struct {
	stop  atomic.Bool
	done  chan struct{} // closed when the goroutine ends; nil without Prefault
	bytes atomic.Int64  // faulted in so far
}

// startPrefault starts the prefault goroutine (Config.Prefault).
func (a *Arena) startPrefault() {
	a.pf.done = make(chan struct{})
	go a.prefaultAll()
}

// prefaultAll maps and faults in every slab, low first, until done, stopped
// by Close, or refused memory by the host (then allocations meet the same
// refusal and throttle with ErrFull).
func (a *Arena) prefaultAll() {
	defer close(a.pf.done)
	populate, page := true, unix.Getpagesize()
	for i := range a.slabs {
		mem, ok := a.prefaultMap(i)
		if !ok {
			return
		}
		for off := 0; off < len(mem); off += prefaultStep {
			if a.pf.stop.Load() {
				return
			}
			piece := mem[off:min(off+prefaultStep, len(mem))]
			if populate {
				err := unix.Madvise(piece, populateAdvice)
				if err != nil && err != unix.EINVAL {
					return // ENOMEM and the like: the host is short of memory
				}
				populate = err == nil
			}
			if !populate {
				touchPages(piece, page)
			}
			a.pf.bytes.Add(int64(len(piece)))
		}
	}
}

// prefaultMap returns slab i's memory, mapping it (and any below it) first
// if no allocation has yet. ok is false once the arena is closing or the
// host refuses memory.
func (a *Arena) prefaultMap(i int) (mem []byte, ok bool) {
	a.slabMu.Lock()
	defer a.slabMu.Unlock()
	for m := int(a.mapped.Load()); m <= i; m++ {
		if a.closed.Load() || a.pf.stop.Load() || a.mapSlab(m) != nil {
			return nil, false
		}
		a.mapped.Store(int32(m + 1))
	}
	return a.slabs[i].mem, !a.pf.stop.Load()
}

// touchPages faults in every page of b by adding 0 to its first word
// atomically: safe while a chunk in b is being written (see above).
func touchPages(b []byte, page int) {
	for off := 0; off < len(b); off += page {
		atomic.AddUint32((*uint32)(unsafe.Pointer(&b[off])), 0)
	}
}

// stopPrefault stops the prefault goroutine, if any, and waits for it: Close
// must not unmap memory under it.
func (a *Arena) stopPrefault() {
	if a.pf.done == nil {
		return
	}
	a.pf.stop.Store(true)
	<-a.pf.done
}
