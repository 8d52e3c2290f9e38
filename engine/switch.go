package engine

import (
	"fmt"

	"sluice/batch"
)

// A topic expansion (docs/cluster.md) re-splits the logical ranges over more physical
// partitions and raises the topic version V. Each partition that existed before changes
// layout at a switch offset: the records below it were routed by the old layout, those
// from it on by the new one. The driver switches a partition in three steps:
//
//	Freeze   appends stop (ErrSwitching, a retriable refusal); the next offset is the
//	         switch offset S, fixed from here on
//	         ...the driver waits until C covers S-1 (everything of the old layout is
//	         durable, so any later load of the partition starts at or past S) and records
//	         S where every other broker and client reads it...
//	Switch   V is raised; appends of the new version go on from S
//
// Thaw undoes a Freeze that could not complete (the partition moved meanwhile).
//
// A producer that routed records by the old layout and had not seen them persisted asks
// for them again with the old V (drain): the partition acknowledges those its producers'
// sequences hold (they are below S, hence durable) and refuses the others with
// version_mismatch, appending nothing either way; the producer routes the refused ones
// again by the new layout.

// Version returns the topic version the partition serves. Safe from any goroutine.
func (p *Partition) Version() uint32 { return p.version.Load() }

// Freeze stops appends and returns the switch offset: the offset the next append (of
// the new version, after Switch) gets. Duplicates are still acknowledged. Safe from any
// goroutine.
func (p *Partition) Freeze() int64 {
	p.app.Lock()
	defer p.app.Unlock()
	p.app.frozen = true
	_, next := p.store.Bounds()
	return next
}

// Switch raises the partition's version to v (at least its current one) and lets
// appends go on: requests of version v from now on, their stamped batches' records held
// to the logical range the partition serves among the partitions the topic has at v
// (0: unknown, not held; PartitionConfig.Partitions). Safe from any goroutine.
func (p *Partition) Switch(v uint32, partitions int) {
	p.app.Lock()
	defer p.app.Unlock()
	if v < p.version.Load() {
		panic(fmt.Sprintf("BUG: engine: %s/%d switched from version %d down to %d", p.topic, p.id, p.version.Load(), v))
	}
	// The range first: a request that reads the new version (windowOpen, before the lock)
	// then reads its range, and is held to it (a review found batches appended unheld
	// with the version stored first).
	p.setLogical(v, partitions)
	p.version.Store(v)
	p.app.frozen = false
}

// Thaw lets appends go on at the current version after a Freeze. Safe from any goroutine.
func (p *Partition) Thaw() {
	p.app.Lock()
	defer p.app.Unlock()
	p.app.frozen = false
}

// drain answers batches sent with an older topic version than the partition's: when the
// producers' sequences hold every one of them, they are acknowledged with the offsets
// they got (as a resend is); otherwise nothing is appended and the answer is
// version_mismatch. Requires p.app.
func (p *Partition) drain(batches []byte, res *ProduceResult) error {
	for rest := batches; len(rest) > 0; {
		h, err := batch.Check(rest)
		if err != nil {
			return fmt.Errorf("%w at byte %d of the request: %w", ErrInvalidBatch, len(batches)-len(rest), err)
		}
		rest = rest[h.Size():]
		if !idempotent(&h) {
			return p.versionMismatch()
		}
		if seqWraps(&h) { // as on the append path: never a resend, never appendable
			return fmt.Errorf("%w at byte %d of the request: producer %d's batch reaches the end of its sequences",
				ErrInvalidBatch, len(batches)-len(rest)-h.Size(), h.ProducerID)
		}
		verdict, prev := p.app.producers[h.ProducerID].check(&h)
		switch verdict {
		case seqDuplicate:
			if res.Base < 0 {
				res.Base = prev.base
			}
			res.Last = prev.last
		case seqOld:
		default:
			return p.versionMismatch()
		}
		res.Duplicates++
	}
	return nil
}

// versionMismatch returns the refusal of a request of another version, with the window.
func (p *Partition) versionMismatch() error {
	w := p.Window()
	return &WindowError{Err: ErrVersionMismatch, Version: w.Version, Session: w.Session, Checkpoint: w.Checkpoint}
}
