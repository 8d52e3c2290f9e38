package client

import (
	"fmt"

	"sluice/batch"
	"sluice/codec"
	"sluice/wire"
)

// A producer across a topic expansion (docs/cluster.md, "Expansion"). When the metadata
// shows more partitions at a newer version, the producer stops taking records (Produce
// waits), and every window drains (window_drain.go): its records routed by the old
// layout are either found in the log (acknowledged; they stay in their old partition,
// below its switch offset) or known absent. Once every window is resolved, the absent
// ones are routed again by the new layout, window by window in their order, before any
// new record: so the records of one logical id keep the order they were produced in,
// those of the old layout before those of the new one, which is the order consumers
// deliver them in (consumer_layout.go).

// expandLocked starts following the expansion to t: every window drains.
func (p *Producer) expandLocked(t wire.Topic) {
	if p.mu.next != nil && p.mu.next.Version >= t.Version {
		return
	}
	p.mu.next = &t
	for i, w := range p.mu.wins {
		w.startDrain(t.Version)
		p.mu.links[i].wake()
	}
	p.finishExpansionLocked()
}

// finishExpansionLocked re-routes the records every window could not drain, once all are
// resolved, and goes on with the new layout. It reports whether the expansion finished.
func (p *Producer) finishExpansionLocked() bool {
	t := p.mu.next
	if t == nil {
		return false
	}
	for _, w := range p.mu.wins {
		if !w.resolvedDrain() {
			return false
		}
	}
	var moved [][]*pbatch
	for _, w := range p.mu.wins {
		moved = append(moved, w.takeUnheld(t.Version))
	}
	for i := len(p.mu.wins); i < len(t.Partitions); i++ {
		p.mu.wins = append(p.mu.wins, newWindow(&p.mu.sh, i, t.Version, p.pid))
		p.mu.links = append(p.mu.links, p.linkLocked(t.Partitions[i].Addr))
	}
	p.mu.version, p.mu.next = t.Version, nil
	p.mu.rt = router{p: len(t.Partitions)}
	p.mu.layoutGen++
	var d codec.Decompressor // one for every batch moved (a zstd one sets up a decoder)
	for _, bs := range moved {
		for _, b := range bs {
			if err := p.rerouteLocked(&d, b); err != nil {
				p.failLocked(err)
				return true
			}
		}
	}
	p.applyAddrsLocked(*t)
	for _, l := range p.mu.links {
		l.wake()
	}
	p.notifyLocked()
	return true
}

// rerouteLocked adds the records of b, a batch no partition holds, again, routed by the
// new layout (by the logical id each was routed by before). A batch a ProduceSync waits
// for is followed to the batch its last record went to. b is read with d, whose buffer
// is reused (b's records are copied into windows before d's next use).
func (p *Producer) rerouteLocked(d *codec.Decompressor, b *pbatch) error {
	var it batch.Iter
	if err := d.Iter(&it, b.buf); err != nil {
		return fmt.Errorf("BUG: cannot read back a produced batch: %w", err)
	}
	now := p.now()
	var last *window
	var r Record
	for i := 0; it.Next(); i++ {
		rec := it.Record()
		r = Record{Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp, Logical: rec.Logical, UseLogical: true,
			Headers: r.Headers[:0]}
		if b.prog != nil {
			r.Progress = b.prog[i]
		}
		for hi := rec.HeaderIter(); ; {
			h, ok := hi.Next()
			if !ok {
				break
			}
			r.Headers = append(r.Headers, batch.RecordHeader{Key: h.Key, Value: h.Value})
		}
		_, part := p.mu.rt.route(&r)
		last = p.mu.wins[part]
		last.add(&r, r.Logical, r.Timestamp, now)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("BUG: cannot read back a produced batch: %w", err)
	}
	if b.sync && last != nil {
		last.seal()
		b.moved, b.movedWin = last.q[len(last.q)-1], last
		b.moved.sync = true // the ProduceSync follows it through a later expansion too
	}
	return nil
}

// movedTo follows a batch re-routed by an expansion to where its last record went.
func movedTo(w *window, b *pbatch) (*window, *pbatch) {
	for b.moved != nil {
		w, b = b.movedWin, b.moved
	}
	return w, b
}
