// Package engine is the partition: a write buffer in the memory arena, a stored log behind
// persist.Store, the write window of DESIGN §2 (version V, session S, durable checkpoint
// C), producer deduplication, and the requests parked on the partition (long-poll fetches
// and produces waiting for C).
//
// A Partition is a synchronous state machine (STYLE rule 4, raft's RawNode): no
// goroutines, sockets, timers or clock reads. Deadlines and "now" come in as arguments on
// the driver's clock; results say what to answer, and Ready lists the parked requests to
// answer now. The driver (package broker) owns the goroutines, the timers and the
// sockets: it calls a partition from one goroutine, the partition's owner (its shard),
// and turns results into answers. wait.go draws the life of a parked request.
//
// Concurrency. Owner only: Produce, Fetch, OffsetForTime, the parking methods (ParkFetch,
// ParkDurable, Release, Expire, NextDeadline, Ready, Parked), Checkpointed,
// ApplyRetention, Shutdown, Close. From the persister goroutine (one at a time,
// concurrently with the owner): Persist, which waits for the disk and so never runs on
// the owner. From any goroutine, without a lock: Window, CheckWindow, Damage, Counters.
// The arena's reclaimer runs on its own goroutines; the write buffer guards itself.
package engine
