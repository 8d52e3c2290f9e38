// Package engine holds the partition logic of the broker: a partition is a write buffer in
// the memory arena, a segment log, the write window of DESIGN §2 (version V, session S,
// durable checkpoint C) and producer deduplication; topics map 65536 logical partitions
// onto physical ones.
//
// Concurrency: a Partition is a synchronous state machine with no goroutines, sockets or
// clocks (STYLE rule 4). Its owner — one shard goroutine — calls every method except the
// few marked safe from any goroutine (counters read by metrics). Time and session values
// come in as arguments. The arena's reclaimer may run on other goroutines; the write
// buffer guards itself.
package engine
