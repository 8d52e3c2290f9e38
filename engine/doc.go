// Package engine is the partition: a write buffer in the memory arena, a stored log behind
// persist.Store, the write window of DESIGN §2 (version V, session S, durable checkpoint
// C), producer deduplication, and the requests parked on the partition (long-poll fetches
// and produces waiting for C).
//
// A Partition is a synchronous state machine (STYLE rule 4, raft's RawNode): no
// goroutines, sockets, timers or clock reads. Deadlines and "now" come in as arguments on
// the driver's clock; results say what to answer, and Ready lists the parked requests to
// answer now. The driver (package broker) owns the goroutines, the timers and the
// sockets and turns results into answers. wait.go draws the life of a parked request.
//
// Concurrency: three domains.
//   - The append domain: Produce, from any goroutine. The driver calls it on the event
//     loop that read the request, so that a produced byte is copied once, from the socket
//     buffer to its place in the arena (docs/writepath.md). The partition's append lock
//     serializes appenders; it guards the producers' sequences and the placement of
//     batches in the store and the buffer, and is held for memory work only. A request's
//     batches are checked (CRC, records) before it is taken: that reads the request alone.
//   - The owner (the partition's shard): Fetch, OffsetForTime, the parking methods
//     (ParkFetch, ParkDurable, DataArrived, Release, Expire, NextDeadline, Ready, Parked),
//     Checkpointed, ApplyRetention, Shutdown, Close.
//   - The persister (one goroutine at a time): Persist, which writes to the disk and so
//     never runs on the owner or an event loop, concurrently with both.
//
// From any goroutine, without a lock: Window, CheckWindow, Damage, Counters, Pending,
// FetchesParked, Version. From any goroutine, under the append lock: Freeze, Switch and
// Thaw (a topic expansion's switch to a new version, switch.go). The arena's reclaimer runs on its own goroutines; the write buffer
// guards itself. Lock order: the append lock, then the write buffer's (then the store's).
package engine
