package broker

import (
	"sync/atomic"
	"time"

	"sluice/persist/local"
)

// Waking a shard's persister. The persister passes over its shard's partitions every
// fsync interval (log.fsync_interval, 5 ms by default) while any of them has data
// waiting, and an appender may wake it sooner (kick: much waiting, or a sync per batch).
// With nothing waiting it parks: ticking regardless, an idle broker's two persisters
// woke 400 times a second, 3-4 % of a core on a host where a thread's wake costs 30 µs
// (docs/bench/latency-notebook.md, 2026-12-07), for passes that found nothing to do.
//
// Parking races with appends, and is decided as a Dekker handshake on two sequentially
// consistent atomics: the persister sets parked, then looks at every partition's
// Pending; an appender adds to Pending (the log's placed bytes), then looks at parked.
// One of the two sees the other's write, so either the persister finds the data and
// keeps ticking, or the appender finds it parked and resumes it. A resumed persister
// passes one interval after its last pass began, at once after a longer idle spell: as
// the fixed ticker did, it passes at most once an interval, and data waits at most an
// interval (plus the pass before it) for its pass. (A first version waited a whole
// interval after each resume, so that a produce waiting for durability after an idle
// spell took the old worst case every time; a review caught it.)
//
// parkedCheck bounds a parked persister's sleep all the same, so that a wake-up this
// reasoning missed would delay a pass by at most that long rather than for ever.
type persistWake struct {
	kick   chan struct{} // pass now
	resume chan struct{} // tick again: data arrived while parked
	parked atomic.Bool
	// owed is set by a checkpoint the shard's full queue refused elsewhere (passShipped,
	// HDFS's acknowledgment): the next pass submits the shard's checkpoint for it.
	owed atomic.Bool
	// parks and resumes count the persister's parks and the appends that resumed it
	// (sluice_persister_events_total).
	parks, resumes atomic.Uint64
}

// parkedCheck is how long a parked persister sleeps at most.
const parkedCheck = time.Second

func newPersistWake() *persistWake {
	return &persistWake{kick: make(chan struct{}, 1), resume: make(chan struct{}, 1)}
}

// signal sends on ch unless a signal is already waiting there.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default: // already woken
	}
}

// kickPersister wakes pt's shard's persister after an append: at once when pt has much
// waiting or its policy syncs every batch; to tick again when it is parked. Any
// goroutine; never blocks. The parked flag is loaded before it is swapped, so that
// while the persister ticks an append reads a shared line and writes nothing.
func (b *Broker) kickPersister(pt *part) {
	w := b.wakes[pt.shard.ID()]
	if b.cfg.Log.Sync == local.SyncEveryBatch || pt.p.Pending() >= persistBytes {
		signal(w.kick)
		return
	}
	if w.parked.Load() && w.parked.CompareAndSwap(true, false) {
		w.resumes.Add(1)
		signal(w.resume)
	}
}

// persisterEvents returns how many times the shards' persisters parked, and how many
// appends resumed them.
func (b *Broker) persisterEvents() (parks, resumes uint64) {
	for _, w := range b.wakes {
		parks += w.parks.Load()
		resumes += w.resumes.Load()
	}
	return parks, resumes
}

// oweCheckpoint has pt's shard's persister submit the shard's checkpoint at once: one
// that the shard's full queue refused must not be lost (the write buffers would keep
// durable data as not durable, and a full arena refuse every produce for good). Any
// goroutine; never blocks.
func (b *Broker) oweCheckpoint(pt *part) {
	w := b.wakes[pt.shard.ID()]
	w.owed.Store(true)
	signal(w.kick)
}
