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
// # Recovery and damage
//
// Open scans every segment that holds offsets above the recovery point R. A bad batch
// above R in the last segment is a torn tail and is cut off; one at or below R, or in a
// segment followed by another (a roll makes a segment whole before the next begins), or
// a log that ends below R, is damage of acknowledged data: the log opens damaged (Damage), serves what lies
// below, and refuses writes until an operator cuts it (Repair, `sluice segment repair`).
// Without a readable recovery point, Open cuts the last segment at its first bad batch,
// as for a torn tail. Segments wholly at or below R are not read at open; their batch
// headers are checked the first time a read covers them (verify.go), so a read never
// serves a header that does not parse or does not continue the offsets before it.
//
// # Goroutines
//
//   - The owner (the partition's shard) calls Append, Truncate, ApplyRetention, Tick and
//     Close.
//   - Sync may run on another goroutine (the broker's flusher) concurrently with Append.
//   - ReadRegion, Read, OffsetForTime, WalkHeaders, Bounds, Start, Next, Durable, Damage,
//     Pending and Stats are safe from any goroutine.
//   - A FilePool is shared by every log of a process and is safe from any goroutine.
//
// # Locks
//
// Lock order, outermost first:
//
//	Log.syncMu → Log.mu → FilePool.mu
//
// Log.syncMu serializes Sync, Truncate and Close and guards the recovery point's state.
// Log.mu guards the segment list and every segment's mutable fields. Append, Sync and a
// roll never hold it across a write or an fsync; readers may wait on it for reads only: a
// segment's first use reads its index files (or rebuilds them by a scan) under it.
// Truncate, a rare recovery step, holds it throughout, fsyncs included. FilePool.mu is a
// leaf: held for list operations only, never across I/O. Eviction takes no Log lock, so one log's reader never waits for another
// log's lock: a segment's descriptor is an atomic pointer to a reference-counted handle,
// and eviction swaps the pointer and drops a reference. Checked-interval bitmaps, handle
// reference counts, and the log's start, next and durable offsets are atomics.
//
// # Lifetimes
//
// A descriptor closes when the last reference to its handle goes: the segment's own
// (dropped by eviction, deletion, truncation or Close) or a user's (a Region, a lookup,
// an fsync). So retention may delete a file and the pool may evict it while a Region is
// in the middle of a sendfile on it.
package local
