package broker

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"sluice/engine"
	"sluice/internal/failpoint"
	"sluice/persist"
	"sluice/sched"
	"sluice/wire"
)

// part drives one physical partition on its shard: it feeds requests to the
// engine.Partition, answers what the partition says is ready, and keeps one shard timer
// armed for the earliest deadline parked on it.
type part struct {
	topic *topic
	id    int
	shard *sched.Shard
	// p is the partition; nil when it could not be opened, with offline saying why.
	p       *engine.Partition
	offline error

	// Made once, so that handing them to the shard allocates nothing.
	dataArrived func(*sched.Shard)

	// Shard-owned.
	timer   sched.Timer
	armed   int64 // the deadline timer is armed for; -1 when none
	onTimer func(time.Time)
	ready   []engine.Waiter // reused by settle

	// closeMu orders the persister's passes with the close of a partition given up while
	// the broker runs (distributed mode): closed is set under it, and the persister
	// skips a closed partition.
	closeMu sync.Mutex
	closed  bool

	// Persister-owned.
	persistFailed bool
	// persistErrLogged is set once an error that left the store usable is logged, until
	// a pass succeeds. Persister only.
	persistErrLogged bool

	// Any goroutine.
	appended atomic.Uint64 // batch bytes accepted since load (distributed mode only)
	// arrivedAt is when the first append since parked long polls were last woken found
	// them parked (Unix ns; 0: none since): the start of their wake stage (stages.go).
	arrivedAt atomic.Int64
	failed    atomic.Bool // a write or sync failed the store for good
	noSpace   atomic.Bool // the disk is full (space says which source found it so)
	space     spaceState
	// Distributed mode: unloading refuses produce (the partition is being given up);
	// epoch is the assignment epoch it was loaded for; lateShipped holds an HDFS
	// acknowledgment that came while the broker's ZooKeeper lease was not confirmed, to
	// pass on once it is (0: none).
	unloading               atomic.Bool
	abandoned               atomic.Bool // given up at a session expiry: HDFS acks no longer count
	epoch                   uint64
	lateShipped             atomic.Int64
	appendLog               everyLog
	retentionLog, answerLog everyLog
	// switchAsked is set once switchPart asked ZooKeeper to record the partition's
	// switch: the znode may exist although no answer said so, so the freeze is never
	// undone from then on.
	switchAsked atomic.Bool
}

func (b *Broker) newPart(t *topic, id int) *part {
	pt := &part{topic: t, id: id, shard: b.sched.ShardFor(partitionKey(t.meta.Name, id)), armed: -1}
	pt.onTimer = func(time.Time) { b.expire(pt) } // made once: arming allocates nothing
	pt.dataArrived = func(*sched.Shard) {
		defer b.recoverShard("data arrived", pt)
		at := pt.arrivedAt.Swap(0)
		pt.p.DataArrived()
		if b.settle(pt) > 0 {
			since(b.stages.wake, at, time.Now().UnixNano())
		}
	}
	return pt
}

// partitionKey hashes a partition's identity for shard placement (FNV-1a).
func partitionKey(topic string, id int) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(topic); i++ {
		h = (h ^ uint64(topic[i])) * 1099511628211
	}
	return (h ^ uint64(id)) * 1099511628211
}

// state names the partition's state for /metrics. Safe from any goroutine.
func (pt *part) state() string {
	switch {
	case pt.p == nil && errors.Is(pt.offline, errNotOwner):
		return "not_owner"
	case pt.p == nil:
		return "offline"
	case pt.p.Damage() != nil:
		return "damaged"
	case pt.failed.Load():
		return "failed"
	case pt.noSpace.Load():
		return "no_space"
	}
	return "serving"
}

// refusal answers requests to a partition that is not open here: not_owner for one this
// broker does not hold in distributed mode (another broker does, or none yet), else
// not_serving with why it could not be opened.
func (pt *part) refusal() error {
	if errors.Is(pt.offline, errNotOwner) {
		return wire.NewError(wire.CodeNotOwner, pt.offline.Error())
	}
	return wire.NewError(wire.CodeNotServing, fmt.Sprintf("partition %s/%d is offline: %v", pt.topic.meta.Name, pt.id, pt.offline))
}

// settle answers what the partition woke (fetches with their data, produces with the
// checkpoint) and keeps the timer armed for the next deadline. The driver calls it after
// every engine call that can wake requests. It returns how many long polls it served.
// Shard only.
func (b *Broker) settle(pt *part) (fetches int) {
	pt.ready = pt.p.Ready(pt.ready[:0])
	for _, w := range pt.ready {
		if b.serveWoken(pt, w) {
			fetches++
		}
	}
	clear(pt.ready)
	b.arm(pt)
	return fetches
}

// serveWoken answers one woken request; fetch says it was a long poll. A panic in it is
// recovered here, for this request alone, and answered with an internal error (a no-op
// if it was answered already): Ready took every woken request out of the engine's wait
// lists at once, so one recovered by the caller would leave the rest unanswered, and
// their connections' later answers behind them, for good. Shard only.
func (b *Broker) serveWoken(pt *part, w engine.Waiter) (fetch bool) {
	defer func() {
		if r := recover(); r != nil {
			b.logPanic("woken request", pt, r)
			err := wire.NewError(wire.CodeInternal, fmt.Sprintf("internal error answering a woken request: %v", r))
			switch t := w.(type) {
			case *fetchTask:
				b.respond(t.c, t.slot, t.hdr, err, nil)
			case *mfWaiter:
				b.respond(t.m.c, t.m.slot, t.m.hdr, err, nil)
			case *produceTask:
				b.respond(t.c, t.slot, t.hdr, err, nil)
			}
		}
	}()
	switch t := w.(type) {
	case *fetchTask:
		b.parkedFetch.Add(-1)
		failpoint.Panic("woken_fetch", pt.topic.meta.Name)
		t.serve()
		return true
	case *mfWaiter:
		b.parkedFetch.Add(-1)
		failpoint.Panic("woken_fetch", pt.topic.meta.Name)
		t.m.woken(t.pt.shard) // on the partition's shard
		return true
	case *produceTask:
		b.parkedAck.Add(-1)
		t.answerWindow()
		return false
	default:
		panic(fmt.Sprintf("BUG: broker: %T parked on a partition", w))
	}
}

// arm sets the partition's timer for its earliest parked deadline, unless it is armed
// for one at least as early already (a timer that fires for a request answered meanwhile
// just re-arms). Not while the shard closes: it fires every pending timer at once then,
// so a timer armed from one would fire again and again; what is parked then is answered
// by shutdownPart, after the last sync. Shard only.
func (b *Broker) arm(pt *part) {
	d, ok := pt.p.NextDeadline()
	if !ok || (pt.armed >= 0 && pt.armed <= d) || pt.shard.Closing() {
		return
	}
	pt.timer.Stop()
	pt.armed = d
	pt.timer = pt.shard.After(time.Duration(max(d-b.now(), 0)), pt.onTimer)
}

// expire is the partition timer: it wakes every request whose deadline passed.
func (b *Broker) expire(pt *part) {
	defer b.recoverShard("timer", pt)
	pt.armed = -1
	pt.p.Expire(b.now())
	b.settle(pt)
}

// scheduleBackground registers each shard's periodic work (retention) and, for when the
// shard stops, the last sync and close of its partitions. It runs before the shards
// start. (Syncs are the persisters' work; with the every-batch and never policies C
// moves on append, and Produce wakes what it covers.)
func (b *Broker) scheduleBackground() {
	for i := range b.sched.NumShards() {
		sh := b.sched.Shard(i)
		sh.Every(b.cfg.RetentionCheck, "retention", func(time.Time) { b.forServing(sh, b.retain) })
		sh.OnClose(func() { b.forServing(sh, b.shutdownPart) })
	}
}

// forServing runs fn on every opened partition of shard sh.
func (b *Broker) forServing(sh *sched.Shard, fn func(*part)) {
	for _, pt := range b.partsOf(sh) {
		if pt.p != nil {
			fn(pt)
		}
	}
}

// persistBytes is how much a partition may have waiting before an appender wakes its
// persister ahead of the next tick: large writes, and the arena's pending memory
// recycled long before it fills.
const persistBytes = 4 << 20

// persistLoop is a shard's persister, on a goroutine of its own: every fsync interval,
// and when an appender wakes it, it has each of the shard's partitions with data waiting
// write it from the arena and make it durable by the policy (Partition.Persist,
// concurrently with appends), then has the shard pass the new checkpoints on and answer
// the produces waiting for them. A partition whose write or sync failed is never
// persisted again (a failed write is not retried over the same data; the partition
// refuses writes until it is reloaded); one whose disk had no room for its next segment
// is tried again at the next pass.
//
// A checkpoint is never dropped. The shard's queue is bounded and refuses a task when
// full (sched.ErrBusy), and what Persist wrote is not pending in the store any more: a
// later pass finds nothing to write, so the checkpoint could not ride on the next pass's
// writes. It used to be lost that way, and the write buffers then kept data that was on
// disk as not yet durable, the arena filled with it and every produce was answered busy
// until some client happened to wait for C. So a refused checkpoint stays owed, and each
// pass submits it again until the shard takes it; the persister does not park while one
// is owed. A flag here rather than a submission that cannot be refused: the queue's bound
// is what keeps a swamped shard from growing without limit, and the one task covers
// every partition of the shard (Checkpointed reads the store's C when it runs), so
// retrying it an interval later loses nothing and costs the hot path nothing.
func (b *Broker) persistLoop(sh *sched.Shard, w *persistWake) {
	defer b.persisters.Done()
	interval := b.cfg.Log.SyncInterval
	t := time.NewTimer(interval) // re-armed by each pass: passes an interval apart
	defer t.Stop()
	parked := false     // t is armed for parkedCheck
	owed := false       // a checkpoint the shard's full queue refused: submitted again each pass
	var start time.Time // when the last pass began
	checkpointed := func(*sched.Shard) { b.forServing(sh, b.checkpointed) }
	for {
		select {
		case <-t.C:
		case <-w.kick:
		case <-w.resume:
			if parked { // data arrived while parked: pass an interval after the last one
				parked = false
				t.Reset(max(time.Until(start.Add(interval)), 0))
			} // else a resume that raced park, which found the data itself
			continue
		case <-b.stopPersist:
			return
		}
		start = time.Now()
		persisted := false
		for _, pt := range b.partsOf(sh) {
			if pt.p == nil || pt.persistFailed {
				continue
			}
			pt.closeMu.Lock()
			if pt.closed { // given up since the list was read
				pt.closeMu.Unlock()
				continue
			}
			ok, err := pt.p.Persist()
			pt.closeMu.Unlock()
			switch {
			case err == nil:
				pt.persistErrLogged = false
				if ok && pt.noSpace.Load() { // it wrote: it had the room it lacked
					b.noteSpace(pt, fromPersist)
				}
			case errors.Is(err, persist.ErrNoSpace): // no room for the next segment file
				b.noteNoSpace(pt, fromPersist, err)
			case errors.Is(err, persist.ErrFailed): // the store failed for good: Place refuses too
				pt.persistFailed = true
				pt.failed.Store(true)
				b.cfg.Logger.Error("write or fsync failed: the partition takes no more writes until the broker restarts",
					"topic", pt.topic.meta.Name, "partition", pt.id, "err", err)
			case !pt.persistErrLogged:
				// Anything else left the store usable and wrote nothing (persist.Store):
				// tried again at the next pass, logged once until a pass succeeds.
				pt.persistErrLogged = true
				b.cfg.Logger.Error("cannot persist: trying again", "topic", pt.topic.meta.Name, "partition", pt.id, "err", err)
			}
			persisted = persisted || ok
		}
		if w.owed.Swap(false) {
			owed = true // refused elsewhere (passShipped)
		}
		if persisted || owed {
			// A full queue refuses it (ErrBusy): owed until a pass gets it queued. A closed
			// shard (ErrClosed) runs Shutdown, which takes C, on every partition.
			owed = errors.Is(sh.SubmitFunc(checkpointed), sched.ErrBusy)
		}
		if owed {
			w.parked.Store(false) // not parked: a pass an interval from now submits it again
		} else if b.park(sh, w) {
			if !parked {
				w.parks.Add(1)
			}
			parked = true
			t.Reset(parkedCheck)
			continue
		}
		parked = false
		t.Reset(max(time.Until(start.Add(interval)), 0)) // the pass's own time included
	}
}

// park reports whether the persister parks: whether none of the shard's partitions has
// data waiting (persistwake.go: parked is set before the partitions are looked at, and
// cleared again when one has).
func (b *Broker) park(sh *sched.Shard, w *persistWake) bool {
	w.parked.Store(true)
	for _, pt := range b.partsOf(sh) {
		if pt.p != nil && !pt.persistFailed && pt.p.Pending() > 0 {
			w.parked.Store(false)
			return false
		}
	}
	return true
}

// checkpointed passes a new checkpoint on and answers the produces it covers. Shard only.
func (b *Broker) checkpointed(pt *part) {
	defer b.recoverShard("checkpoint", pt)
	pt.p.Checkpointed()
	b.settle(pt)
}

// retain applies retention to a partition. Shard only.
func (b *Broker) retain(pt *part) {
	defer b.recoverShard("retention", pt)
	if _, err := pt.p.ApplyRetention(); err != nil && !errors.Is(err, persist.ErrDamaged) {
		pt.retentionLog.error(b.cfg.Logger, "retention failed", pt, err)
	}
}

// shutdownPart makes a partition's data durable, answers everything parked on it and
// closes it. It runs on the shard when the shard stops, after every queued request.
func (b *Broker) shutdownPart(pt *part) {
	defer b.recoverShard("shutdown", pt)
	if err := pt.p.Shutdown(); err != nil {
		b.cfg.Logger.Error("final fsync failed", "topic", pt.topic.meta.Name, "partition", pt.id, "err", err)
	}
	b.settle(pt)
	if err := pt.p.Close(); err != nil {
		b.cfg.Logger.Error("close failed", "topic", pt.topic.meta.Name, "partition", pt.id, "err", err)
	}
}

// everyLog rate-limits one kind of error log of one partition: a failing disk must not
// write a log line every few milliseconds. Safe from any goroutine.
type everyLog struct {
	mu         sync.Mutex
	next       time.Time
	suppressed int
}

// logEvery is the shortest interval between two lines of one kind for one partition.
const logEvery = time.Minute

// allow reports whether to log now, and how many lines were suppressed since the last.
func (e *everyLog) allow(now time.Time) (bool, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if now.Before(e.next) {
		e.suppressed++
		return false, 0
	}
	n := e.suppressed
	e.next, e.suppressed = now.Add(logEvery), 0
	return true, n
}
