package engine

// The checkpoint C and the requests parked on the partition. Persist is the one method
// the driver runs off the owner (it waits for the disk); the rest are the owner's.

// Persist has the store write what was appended and make it durable by its policy,
// reading the bytes from the write buffer (the partition is the store's
// persist.Source), and reports whether anything was written. It may block on the disk,
// so the driver runs it on a persister goroutine, never on the owner or an event loop;
// it is safe concurrently with appends. The driver then calls Checkpointed on the owner
// to pass the new C on. A failed write fails the store for good (persist.ErrFailed);
// no space for the next segment file (persist.ErrNoSpace) leaves it usable.
func (p *Partition) Persist() (bool, error) {
	if p.store.Pending() == 0 {
		return false, nil
	}
	return p.store.Persist(p)
}

// Pending returns the bytes appended and not yet durable. Safe from any goroutine.
func (p *Partition) Pending() int64 { return p.store.Pending() }

// DataArrived wakes the long polls parked here whose records have come: an appender
// appended (the driver calls it when Produce appended and FetchesParked said polls
// wait). A poll parked at the end stays: it was parked at an end a read moved ahead of
// that appender (Partition.end), and its records are still to come. Owner only.
func (p *Partition) DataArrived() { p.waits.wakeBelow(&p.waits.fetches, p.end.Load()) }

// Checkpointed takes the checkpoint C (the store's, bounded by the replica's in
// distributed mode: replica.go): what the store made durable becomes reclaimable in the
// write buffer, and the produces waiting for C wake. Owner only.
func (p *Partition) Checkpointed() {
	if d := p.store.Durable(); d != p.local {
		p.local = d
		p.buf.SetDurable(d)
	}
	if d := p.checkpoint(); d != p.durable {
		p.durable = d
		p.waits.wakeBelow(&p.waits.durables, d+1) // C covers the target: target <= d
	}
}

// ApplyRetention deletes what the retention settings let go, never above C (so never
// what the replica has not acknowledged). Owner only.
func (p *Partition) ApplyRetention() (int, error) {
	return p.store.ApplyRetention(p.checkpoint())
}

// ParkFetch parks a long poll for offset until data exists there, deadline passes (on the
// driver's clock) or the driver releases it. It parks nothing and returns false when the
// fetch should be answered now: data exists at offset (or it is out of range), the
// partition is damaged (no data will come: the read answers the damage), or it is
// shutting down. Owner only.
func (p *Partition) ParkFetch(w Waiter, offset, deadline int64) bool {
	p.fetchParked.Add(1) // before reading the end: see fetchParked
	if _, next := p.bounds(); offset != next || p.closing || p.Damage() != nil {
		p.fetchParked.Add(-1)
		return false
	}
	p.waits.park(w, WaitFetch, offset, deadline)
	return true
}

// ParkDurable parks a produce until C covers target or deadline passes. It parks nothing
// and returns false when C covers target already, or the partition is shutting down.
// Owner only.
func (p *Partition) ParkDurable(w Waiter, target, deadline int64) bool {
	p.Checkpointed()
	if target <= p.durable || p.closing {
		return false
	}
	p.waits.park(w, WaitDurable, target, deadline)
	return true
}

// Expire wakes every parked request whose deadline is at or before now. Owner only.
func (p *Partition) Expire(now int64) { p.waits.expire(now) }

// NextDeadline returns the earliest deadline of a parked request; ok is false when none
// is parked. The driver arms its timer for it. Owner only.
func (p *Partition) NextDeadline() (deadline int64, ok bool) { return p.waits.nextDeadline() }

// Release wakes w now if it is parked here (the network layer asks for it when a later
// answer on w's connection is ready: answers go out in request order, so a parked long
// poll would hold them up). It reports whether w was parked here. Owner only.
func (p *Partition) Release(w Waiter) bool {
	if w.state().on != &p.waits {
		return false // not parked, or parked on another partition
	}
	p.waits.wake(w, WokeRelease)
	return true
}

// Parked returns how many requests are parked (fetches, durable produces). Owner only.
func (p *Partition) Parked() (fetches, durables int) {
	return len(p.waits.fetches), len(p.waits.durables)
}

// Ready appends the requests woken since the last call to dst, in the order they woke,
// and forgets them: the driver answers each (a fetch with Fetch, a produce with Window).
// Owner only.
func (p *Partition) Ready(dst []Waiter) []Waiter {
	dst = append(dst, p.waits.ready...)
	clear(p.waits.ready)
	p.waits.ready = p.waits.ready[:0]
	return dst
}
