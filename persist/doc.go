// Package persist is the seam between a partition (package engine) and the storage that
// holds its log: the Store interface, the Region a store serves reads with, and the errors
// every store reports. persist/local implements Store over segment files on the host's
// disk; the HDFS tier implements it next. The engine sees nothing of either but this
// package.
//
// # The contract of a Store
//
// A store holds one physical partition's batches (docs/format.md §1) at dense offsets
// [Start, Next): every batch's base offset is the previous batch's last offset plus one.
//
// Placing and persisting. The owner places a batch (Place): the store gives it the next
// offset and a place in a segment file, with no I/O, and the owner keeps its bytes in
// memory (its write buffer, laid out like the files: docs/writepath.md). The persister
// later writes what was placed (Persist), reading the bytes from the owner's buffer
// (Source), and only then does the checkpoint move. Reads serve only what is written;
// the owner serves the rest from its buffer.
//
// Durable. Durable() is the checkpoint C: every batch whose last offset is at most C
// survives a crash. What a crash is depends on the store's policy: for persist/local
// with an fsync policy, a crash of the host (the data was fdatasync'd); with the
// never-fsync policy, a crash of the process only (the data was written to the file).
// C only grows, except that Truncate lowers it to the truncation point, and it never
// passes what is written. Data above C may be lost by a crash; what survives is a prefix
// of what was placed, never a batch with a hole.
//
// Opening. A store is opened by its backend's constructor (local.Open), which recovers:
// batches above the store's durable record of C that do not pass their checks are a torn
// tail and are cut off; an invalid batch at or below it is corruption of acknowledged
// data, which is never cut off silently. The store then opens damaged: Damage reports the
// problem, reads below the damage are served, reads at or past it fail with a
// *CorruptionError, and writes fail with ErrDamaged until an operator repairs the
// partition (`sluice segment repair`).
//
// # Goroutines
//
//   - The owner, one goroutine (the partition's shard): Place, Tail, Truncate,
//     ApplyRetention and Close. Place and Tail do no I/O and never wait for the
//     persister; they take the store's lock, which others hold for in-memory work (and
//     a reader, once per sealed segment per open, to read its index files). Truncate (rare,
//     only with nothing pending), ApplyRetention (file deletions) and Close (a last sync)
//     do I/O; Truncate and Close wait for a Persist in progress.
//   - The persister, at most one goroutine at a time, concurrently with the owner:
//     Persist. It blocks on writes, fdatasync, file creation and index files; this is
//     why it never runs on the owner (a shard that waited for the disk would hold up
//     every partition it owns). The owner runs a last Persist itself once the persister
//     has stopped, before Close.
//   - Any goroutine: ReadRegion, OffsetForTime, WalkHeaders, Bounds, Durable, Damage,
//     Pending and Size. They may read index files or batch headers from the disk, but
//     never wait for a write, a sync or a roll in progress (locks are held only for
//     in-memory work).
//
// A Region holds a reference to its file: the store keeps the file open (even after
// retention has deleted it) until the Region is released.
package persist
