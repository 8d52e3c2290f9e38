package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sluice/admin"
	"sluice/engine"
	"sluice/persist/local"
	"sluice/sched"
	"sluice/wire"
)

// Loading and giving up partitions in distributed mode (cluster.go). A load makes a new
// part and swaps it in; a give-up swaps a placeholder in and closes the old part on its
// shard: a part is never reopened, so what its goroutines read without a lock never
// changes under them.

// takeOver loads a partition assigned to this broker: once the broker it moves from
// released it (or died), from HDFS, retried with backoff while it stays assigned here.
func (b *Broker) takeOver(pid admin.PartitionID, old *part, o admin.Owner) {
	defer b.done(pid)
	cl := b.cl
	if old.p != nil { // held under an older epoch: it moved away and back unseen
		old = b.unload(old, false)
		if old == nil {
			return
		}
	}
	if o.From != "" && o.From != cl.id && !b.waitRelease(pid, o) {
		return
	}
	for attempt := 0; ; attempt++ {
		if cl.stopping() || !cl.assigned(pid, o) {
			return
		}
		// Read on every attempt: an operator who gives up on the data the release
		// names (it is gone from HDFS for good) removes the release znode.
		minEnd, err := b.releasedEnd(pid, o)
		if err == nil {
			err = b.loadAssigned(pid, old, o, minEnd)
		}
		if err == nil {
			return
		}
		if ok, n := old.answerLog.allow(time.Now()); ok {
			b.cfg.Logger.Error("cannot load an assigned partition: retrying", "topic", pid.Topic, "partition", pid.ID,
				"epoch", o.Epoch, "err", err, "suppressed", n)
		}
		select {
		case <-cl.stop:
			return
		case <-time.After(min(100*time.Millisecond<<min(attempt, 6), 5*time.Second)):
		}
	}
}

// assigned reports whether pid is still assigned to this broker as o says.
func (cl *clusterState) assigned(pid admin.PartitionID, o admin.Owner) bool {
	cur := cl.ownerOf(pid)
	return cur.Broker == cl.id && cur.Epoch == o.Epoch
}

// waitRelease waits until the broker the partition moves from released it (for this
// epoch or a later one) or is no longer registered (its lease ended before its session
// did). False when the assignment changed meanwhile or the broker stops.
func (b *Broker) waitRelease(pid admin.PartitionID, o admin.Owner) bool {
	cl := b.cl
	for start := time.Now(); ; {
		if cl.stopping() || !cl.assigned(pid, o) {
			return false
		}
		r, ok, err := cl.c.Released(pid)
		if err == nil && ok && r.Broker == o.From && r.Epoch >= o.Epoch {
			// The cached assignments may be behind: check on ZooKeeper that this load
			// is still the current one before trusting a release.
			cur, cerr := cl.c.Owner(pid)
			return cerr == nil && cur.Broker == cl.id && cur.Epoch == o.Epoch
		}
		if err == nil {
			live, rerr := cl.c.Registered(o.From)
			if rerr == nil && !live {
				return true
			}
		}
		if time.Since(start) > 10*time.Second {
			b.cfg.Logger.Warn("still waiting for the previous broker to release a partition", "topic", pid.Topic,
				"partition", pid.ID, "from", o.From, "epoch", o.Epoch)
			start = time.Now()
		}
		time.Sleep(releaseWait)
	}
}

// releasedEnd returns what the broker the partition moves from saw HDFS acknowledge when
// it released it for this load (0: no such release, or it did not say).
func (b *Broker) releasedEnd(pid admin.PartitionID, o admin.Owner) (int64, error) {
	if o.From == "" || o.From == b.cl.id {
		return 0, nil
	}
	r, ok, err := b.cl.c.Released(pid)
	if err != nil {
		return 0, err
	}
	if !ok || r.Broker != o.From || r.Epoch < o.Epoch {
		return 0, nil
	}
	return r.HDFSNext, nil
}

// loadAssigned opens a partition after what HDFS holds of it, in a new session above
// every epoch on HDFS, and swaps it in (unless it moved meanwhile). The local data of an
// earlier load here is removed first: another broker may have written the same offsets
// since, and everything below C is on HDFS (older offsets are read from there).
//
// minEnd is what the broker that released the partition had seen HDFS acknowledge (0:
// not known): HDFS showing less means it has not caught up with its own
// acknowledgments yet (a listing or a replica behind), and loading then would start the
// partition below acknowledged batches and fence them for good; the load fails and is
// tried again.
func (b *Broker) loadAssigned(pid admin.PartitionID, old *part, o admin.Owner, minEnd int64) error {
	t := old.topic
	opts, err := b.logOptions(t.meta.Options)
	if err != nil {
		return err
	}
	tr := b.readTail(t.meta.Name, pid.ID)
	if tr.err != nil {
		return fmt.Errorf("cannot read the partition's tail on HDFS: %w", tr.err)
	}
	if end := tr.tail.End; minEnd > 0 && (!tr.ok || end < minEnd) {
		return fmt.Errorf("HDFS shows the partition ending at %d (found: %v), below the %d its previous broker %s saw acknowledged: "+
			"waiting for HDFS to show it", end, tr.ok, minEnd, o.From)
	}
	dir := filepath.Join(b.topicDir(t.meta.Name), fmt.Sprint(pid.ID))
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("cannot remove an earlier load's local data: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create the partition's directory: %w", err)
	}
	if tr.ok {
		opts.InitialOffset = tr.tail.End
	}
	l, err := local.Open(dir, opts)
	if err != nil {
		return storageError(err)
	}
	start, _ := l.Bounds()
	if tr.ok {
		start = tr.tail.Start
	}
	session := max(clusterSession(o.Epoch, b.newSession()), tr.tail.Epoch+1)
	version, layouts := b.layoutOf(t)
	if err := b.recordLoadSwitches(pid, layouts, l.Next()); err != nil {
		l.Close()
		return fmt.Errorf("cannot record the partition's switch to a new topic version: %w", err)
	}
	p, err := engine.Open(engine.PartitionConfig{Topic: t.meta.Name, ID: pid.ID, Version: version,
		Session: session, Replicated: true, ReplicaStart: start, Prior: tr.tail.Headers, Records: b.records, Partitions: partitionsAt(layouts, version),
		DedupHorizon: b.cfg.DedupHorizon}, l, b.arena)
	if err != nil {
		l.Close()
		return err
	}
	nw := b.newPart(t, pid.ID)
	nw.p, nw.epoch = p, o.Epoch
	from, _ := l.Bounds()
	cl := b.cl
	cl.mu.Lock()
	ok := !cl.stopping() && cl.assignedLocked(pid, o)
	if ok {
		b.swapPart(old, nw)
		b.shipper.AddAt(t.meta.Name, pid.ID, session, from, &shipSource{b: b, pt: nw})
	}
	cl.mu.Unlock()
	if !ok {
		return p.Close()
	}
	cl.loads.Add(1)
	b.cfg.Logger.Info("loaded", "topic", t.meta.Name, "partition", pid.ID, "epoch", o.Epoch, "session", session,
		"hdfs_start", start, "next", from, "hdfs_epoch", tr.tail.Epoch, "tail_batches", len(tr.tail.Headers))
	return nil
}

// assignedLocked is assigned with cl.mu held.
func (cl *clusterState) assignedLocked(pid admin.PartitionID, o admin.Owner) bool {
	cur := cl.mu.owners[pid]
	return cur.Broker == cl.id && cur.Epoch == o.Epoch
}

// giveUp gives a partition assigned elsewhere up: everything it holds shipped to HDFS
// first, then closed, then released (so the new broker loads it).
func (b *Broker) giveUp(pid admin.PartitionID, pt *part, ship bool) {
	defer b.done(pid)
	if b.unload(pt, ship) == nil {
		return
	}
	cl := b.cl
	o := cl.ownerOf(pid)
	if o.Broker == cl.id || o.Broker == "" {
		return
	}
	for !cl.stopping() {
		err := cl.c.Release(pid, cl.id, o.Epoch, pt.p.ShippedNext())
		if err == nil {
			cl.mu.Lock()
			cl.mu.released[pid] = max(cl.mu.released[pid], o.Epoch)
			cl.mu.Unlock()
			b.cfg.Logger.Info("released", "topic", pid.Topic, "partition", pid.ID, "to", o.Broker, "epoch", o.Epoch,
				"hdfs_next", pt.p.ShippedNext())
			return
		}
		b.cfg.Logger.Warn("cannot release a partition: retrying", "topic", pid.Topic, "partition", pid.ID, "err", err)
		time.Sleep(followRetry)
	}
}

// unload stops serving a partition: produce is refused at once (not_owner); with ship,
// it waits until HDFS acknowledged everything the partition holds (while the lease
// holds: once it lapsed, another broker may own the partition and what is left is
// fenced anyway); then a placeholder is swapped in and the partition closed on its
// shard (parked requests answered). It returns the placeholder, nil when the broker
// stops first.
func (b *Broker) unload(pt *part, ship bool) *part {
	cl := b.cl
	pt.unloading.Store(true)
	name, id := pt.topic.meta.Name, pt.id
	for logged := time.Now(); ship; {
		if cl.stopping() {
			return nil
		}
		if !cl.leased(b.now()) || pt.p.ShippedNext() >= pt.p.Window().Next {
			break
		}
		if time.Since(logged) > 10*time.Second {
			b.cfg.Logger.Warn("giving a partition up waits for HDFS", "topic", name, "partition", id,
				"shipped", pt.p.ShippedNext(), "next", pt.p.Window().Next)
			logged = time.Now()
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.shipper.Remove(name, id)
	shippedNext, next, leased := pt.p.ShippedNext(), pt.p.Window().Next, cl.leased(b.now())
	ph := b.newPart(pt.topic, id)
	ph.offline = errNotAssigned(name, id)
	b.swapPart(pt, ph)
	closed := make(chan struct{})
	closeIt := func(*sched.Shard) {
		defer close(closed)
		pt.closeMu.Lock()
		defer pt.closeMu.Unlock()
		pt.closed = true
		b.shutdownPart(pt)
	}
	for {
		err := pt.shard.SubmitFunc(closeIt)
		if err == nil {
			<-closed
			break
		}
		if errors.Is(err, sched.ErrClosed) {
			break // the broker stops: its shards close every partition
		}
		time.Sleep(time.Millisecond) // a full queue
	}
	cl.unloads.Add(1)
	b.cfg.Logger.Info("gave up", "topic", name, "partition", id, "ship", ship, "hdfs_next", shippedNext, "next", next,
		"leased", leased)
	return ph
}

// giveUpAll gives every partition up at once after a session expiry: they may have
// moved. Produce is refused from the first step; nothing more is shipped (a new owner
// fences it). The assignments are read again before anything is loaded.
func (b *Broker) giveUpAll() {
	cl := b.cl
	cl.mu.Lock()
	// This broker's assignments are gone with its session: loads under way see their
	// partitions unassigned and stop, and metadata names none of them here. The others'
	// stay as last read, and metadata keeps naming their brokers until the next reading
	// (forgetting them too had every partition of the cluster answered as moving, and
	// clients asking again, until ZooKeeper was read on the new session).
	for pid, o := range cl.mu.owners {
		if o.Broker == cl.id {
			delete(cl.mu.owners, pid)
		}
	}
	var held []*part
	b.mu.RLock()
	for _, parts := range b.mu.byShard {
		for _, pt := range parts {
			pt.abandoned.Store(true) // before the lease can be renewed on the new session
			pt.unloading.Store(true)
			pid := admin.PartitionID{Topic: pt.topic.meta.Name, ID: pt.id}
			if !cl.mu.busy[pid] {
				cl.mu.busy[pid] = true
				held = append(held, pt)
			}
		}
	}
	b.mu.RUnlock()
	cl.mu.Unlock()
	b.cfg.Logger.Warn("ZooKeeper session expired: giving every partition up", "partitions", len(held))
	for _, pt := range held {
		cl.wg.Add(1)
		go func() {
			defer b.done(admin.PartitionID{Topic: pt.topic.meta.Name, ID: pt.id})
			b.unload(pt, false)
		}()
	}
}

// passShipped passes HDFS's acknowledgment to the partition and has its shard take the
// new checkpoint. In distributed mode only under a confirmed lease: otherwise it waits
// in lateShipped for the heartbeat.
func (b *Broker) passShipped(pt *part, next int64) {
	if pt.abandoned.Load() {
		return // given up at a session expiry: another broker may own it now
	}
	if b.cl != nil && !b.cl.leased(b.now()) {
		pt.lateShipped.Store(next)
		return
	}
	pt.p.Shipped(next)
	if err := pt.shard.SubmitFunc(func(*sched.Shard) { b.checkpointed(pt) }); errors.Is(err, sched.ErrBusy) {
		b.oweCheckpoint(pt) // the persister submits it (it was dropped: a review of persistLoop's own)
	}
}

// clusterRefusal is the refusal of a produce to a partition being given up, or while the
// lease is not confirmed; nil when the produce may go on.
func (b *Broker) clusterRefusal(pt *part) error {
	switch {
	case b.cl == nil:
		return nil
	case pt.unloading.Load():
		return wire.NewError(wire.CodeNotOwner, fmt.Sprintf("partition %s/%d is moving to another broker: refresh the metadata", pt.topic.meta.Name, pt.id))
	case !b.cl.leased(b.now()):
		return wire.NewError(wire.CodeNotOwner, "this broker's ZooKeeper session is not confirmed: it takes no writes until it is")
	}
	return nil
}

// clusterSession makes a load's session S from the assignment's epoch (the high bits:
// every move raises it, so a later owner's S exceeds every earlier owner's whatever
// their clocks say) and a value unique to this load on this broker (the low 40 bits, in
// ms, of the broker's own increasing session clock: a reload at the same epoch, after a
// session expiry, gets a new S).
func clusterSession(epoch, unique uint64) uint64 {
	const low = 40
	return epoch<<low | (unique/uint64(time.Millisecond))&(1<<low-1)
}
