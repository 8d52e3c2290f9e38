// Package broker assembles the embedded broker: the memory arena, the shards, the topics
// and their partitions on local disk, and the network server. It routes each request
// from the event loop that read it to the shard that owns its partition, and completes
// long polls (fetch with a max wait) and durable acknowledgements (produce waiting for the
// checkpoint) on that shard.
//
// Concurrency. Topics are created and listed under Broker.mu (a RWMutex); everything
// else about a partition — the engine.Partition, its waiters — belongs to its shard
// goroutine. The event loops only look partitions up and submit tasks; they never block.
// Lock order: Broker.mu, then nothing (shards take no broker lock while holding their
// partitions' state).
package broker
