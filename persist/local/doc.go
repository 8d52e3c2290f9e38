// Package local is the segment log of one physical partition on the host's disk: the
// persist.Store that the engine writes batches to and serves reads from (package persist
// states the contract; docs/format.md §2 draws every file's bytes).
//
// # Files
//
// A partition directory holds segments, each a .log of batches back to back with a
// sparse .index and .timeindex (written when the segment is sealed), and one
// recovery-point file: the durable record of the checkpoint C that recovery truncates
// above, never below (recoverypoint.go). Nothing else may live there (Open refuses it).
//
// # Placing and writing (docs/writepath.md)
//
// The owner places a batch (Place, log.go): offset, segment, position, index entry, no
// I/O; the bytes stay in the owner's write buffer, laid out like the file. The persister
// writes them later (Persist, persist.go) through a descriptor opened with O_DIRECT, in
// whole 4096-byte blocks (Block) straight from the buffer's aligned memory; the partial
// first and last blocks of a write are assembled in an aligned block the log keeps
// (blockwriter.go), the last one zero-padded, and rewritten by the next write with the
// bytes below the old end unchanged. Pieces of the source that are not aligned are
// copied through an aligned bounce buffer. Where the filesystem refuses O_DIRECT, the
// same blocks go through the page cache (DirectIO reports which).
//
// Segment files are created by the persister, preallocated 64 MiB ahead (allocStep), and only
// once the segment before is finished: written, cut to its length, fdatasync'd, indexed
// and sealed. So a file exists only once the one before it is whole, and the data of a
// file ends at the first zeros where a batch header should be (scan.go).
//
// Reads serve what is written: a segment's size and next are its written end, moved by
// Persist after the write; placed batches are in the index but not in a reader's view.
//
// # Recovery and damage
//
// Open scans every segment that holds offsets above the recovery point R. A bad batch
// above R in the last segment is a torn tail and is cut off; one at or below R, or in a
// segment followed by another (a roll makes a segment whole before the next begins), or
// a log that ends below R, is damage of acknowledged data: the log opens damaged
// (Damage), serves what lies below, and refuses writes until an operator cuts it
// (Repair, `sluice segment repair`). Zeros where a header should be are the clean end of
// the data. Without a readable recovery point, Open cuts the last segment at its first
// bad batch, as for a torn tail. Segments wholly at or below R are not read at open;
// their batch headers are checked the first time a read covers them (verify.go), so a
// read never serves a header that does not parse or does not continue the offsets
// before it. A healthy open cuts the last segment's file at the end of its data and
// preallocates it again.
//
// # Goroutines
//
//   - The owner (the partition's shard) calls Place, Tail, Truncate, ApplyRetention and
//     Close.
//   - The persister (at most one goroutine at a time) calls Persist, concurrently with
//     the owner.
//   - ReadRegion, Read, OffsetForTime, WalkHeaders, Bounds, Start, Next, Written,
//     Durable, Damage, Pending, DirectIO and Stats are safe from any goroutine.
//   - A FilePool is shared by every log of a process and is safe from any goroutine.
//   - A MemSource is safe from any goroutine.
//
// # Locks
//
// Lock order, outermost first:
//
//	Log.persistMu → Log.mu → FilePool.mu
//
// Log.persistMu serializes Persist, Truncate and Close, and guards the persister's state
// (the write descriptor and its partial block) and the recovery point's. Place never
// takes it. Log.mu guards the segment list and every segment's mutable fields. Place
// holds it for in-memory work only; Persist never holds it across a write, an fdatasync
// or a file creation; readers may wait on it for reads only: a segment's first use reads
// its index files (or rebuilds them by a scan) under it. Truncate, a rare recovery step,
// holds it throughout, fsyncs included. FilePool.mu is a leaf: held for list operations
// only, never across I/O. Eviction takes no Log lock, so one log's reader never waits
// for another log's lock: a segment's read descriptor is an atomic pointer to a
// reference-counted handle, and eviction swaps the pointer and drops a reference.
// Checked-interval bitmaps, handle reference counts, and the log's start, next, written
// and durable offsets are atomics.
//
// # Lifetimes
//
// A read descriptor closes when the last reference to its handle goes: the segment's own
// (dropped by eviction, deletion, truncation or Close) or a user's (a Region, a lookup,
// an fsync). So retention may delete a file and the pool may evict it while a Region is
// in the middle of a sendfile on it. The write descriptor is the persister's alone: it
// closes when its segment is sealed, truncated away, or the log closes.
package local
