// Package memarena is sluice's message memory: one budget per host, shared
// by every partition's write buffer and every file-block cache, with one
// reclaimer. A cold partition costs almost nothing, a hot one may use most of
// the arena, consumers read from memory, and data is released only under
// pressure and only once it is durable.
//
// # Memory
//
// An Arena of Config.Size bytes is cut into slabs (Config.SlabSize), each
// mapped with an anonymous mmap the first time it is needed, and each slab
// into chunks (Config.ChunkSize), the unit of allocation and reclaim. Arena
// memory holds message bytes only, never a Go pointer; a chunk's metadata
// (reference count, generation, owner, last-use stamp) lives in Go-heap
// slices indexed by chunk id. Each slab keeps its free chunks on a lock-free
// stack, so allocating and releasing a chunk takes no lock and no Go-heap
// allocation. Allocation prefers low slabs; a slab found entirely free at two
// sweeps in a row (Arena.Reclaim) is given back with MADV_DONTNEED. Slabs
// are unmapped only by Arena.Close, once nothing is held (DESIGN §7).
//
// A Span is a held piece of a chunk: a reference that keeps the chunk from
// reuse while it is sent on a socket or read by a consumer, even after its
// owner let go of it. Release every span once. Under the invariants build tag
// a double or stale release panics with "BUG: ..." and freed chunks are
// poisoned; otherwise a bad release is counted and ignored where safe.
//
// # Owners
//
// A WriteBuffer (one per partition) is an append-only chain of chunks holding
// whole batches at the stream positions they have in the partition's segment
// files (docs/writepath.md §1): batches back to back within a segment,
// padding (Skip) between segments, chunks starting at multiples of
// ChunkSize, so that a block-aligned range of the stream is block-aligned
// memory. It is indexed by offset (8 bytes a batch, see wbindex.go). The
// persister holds ranges of it (Range) to write them to a file; SetDurable
// moves its checkpoint; chunks leave from the oldest end only, once every
// batch in them is durable. A BlockCache holds blocks of files, always
// durable, so always reclaimable.
//
// # Reclaim
//
// When an allocation leaves free memory below Config.LowWatermark it runs a
// bounded reclaim pass toward Config.HighWatermark on the allocating
// goroutine (skipped if another goroutine is reclaiming); with no free chunk
// at all it waits for the pass in progress, if any, then reclaims (bounded)
// until at least one chunk is back on a free stack.
// The victim is the least recently used reclaimable chunk across all owners:
// reads, writes and cache hits stamp chunks with a logical clock (the arena's
// allocation count; no time.Now per read). Data every reader has passed stops
// being stamped and ages out first, which is Swift's rule. Config.PartitionMin
// is honoured unless an allocation would fail otherwise. When the arena is
// full of data past its checkpoints (or held by readers) an allocation fails
// with ErrFull as soon as that pass finds nothing, which the broker turns into a throttle answer: no
// OOM, no blocked event loop, no unbounded wait.
//
// # Concurrency and lock order
//
// Every exported method is safe for concurrent use, except Arena.Close. A
// write buffer is normally used by its shard's goroutine, but the reclaimer
// runs on whichever goroutine allocates, or on a background driver calling
// Arena.Reclaim. Locks, in the order they may be taken:
//
//  1. WriteBuffer.mu or BlockCache.mu (an owner's lock). A goroutine blocks
//     on at most one owner lock at a time.
//  2. Arena.rc.mu (the reclaim heap). Taken while holding an owner lock
//     when an allocation reclaims (TryLock for the bounded pass, Lock when no
//     chunk is free). Under it, other owners' locks are only TryLock'ed; the
//     allocating owner ("self"), whose lock the caller holds, is used as is.
//     Busy owners are skipped for that pass. So no cycle can form.
//  3. Arena.incoming.mu, Arena.slabMu, holdSet.mu: leaves.
//
// Reference counts, free stacks, counters and the clock are atomics. The
// plain chunk fields gen, owner and stamp are written by the goroutine that
// just popped the chunk or under its owner's lock, and read under that lock
// or while holding a reference; the free stack's CAS and the owner locks
// order those accesses.
//
// Reading the source: config.go and size.go (configuration), slab.go and
// arena.go (memory, free stacks), span.go (holds), writebuffer.go,
// wbindex.go, wbpersist.go and wbreclaim.go (write buffers), blockcache.go
// and bclru.go,
// reclaim.go (the victim heap), stats.go, errors.go, invariants.go. The
// tests: model_test.go (randomized, against a model), race_test.go
// (concurrency); benchmarks are in *_timing_test.go. Operators' notes are in
// docs/memarena.md.
package memarena
