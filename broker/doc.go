// Package broker is the thin driver of the embedded broker: it assembles the memory
// arena, the shards, the catalog of topics on local disk and the network server; routes
// each request from the event loop that read it to the shard that owns its partition;
// and turns what the partition (engine.Partition, a synchronous state machine) says into
// answers. It owns every goroutine, timer and socket; the partition logic is engine's.
//
// Files: broker.go (assembly, start, shutdown), catalog.go (topics on disk: load,
// create, metadata, describe), answer.go (routing on the loop, the one error-to-code
// map, panic recovery), produce.go and fetch.go (the request tasks), part.go (a
// partition's driver: answering what the engine woke, its timer, the persister,
// retention, shutdown), metrics.go; authentication and ACLs: auth.go (the files,
// reloads), authn.go (a connection's session and its exchange), authz.go (each API's
// grant).
//
// Goroutines. Event loops (netio) run Handle, which never blocks: catalog lookups under a
// read lock held for map accesses only, partition windows from atomics, and Submit to a
// shard. A shard runs its partitions' requests, timers, retention and close. One
// persister goroutine per shard syncs the shard's partitions (the only calls that wait
// for the disk's fsync) and hands the new checkpoints back to the shard. Topic creation
// runs on a goroutine of its own. The reclaim driver runs the arena's background pass.
//
// Lock order (the whole broker, written once here and in docs/design.md):
// Broker.createMu → Broker.mu → memarena.WriteBuffer's lock → the arena's locks;
// local.Log.syncMu → local.Log.mu; netio.Conn.mu, sched's mailbox locks and
// authState.reloadMu (the auth watcher's and SIGHUP's, never a loop's) are leaves.
// No lock is held across a call into another package except Broker.createMu (held for a
// whole creation, which no event loop or shard ever takes).
package broker
