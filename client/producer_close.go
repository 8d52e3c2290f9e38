package client

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"sluice/batch"
	"sluice/codec"
	"sluice/wire"
)

// Checkpoint returns the caller's checkpoint: the largest progress number P such that
// every record produced so far with a progress number in (0, P] is persisted (0 when
// none is). Progress numbers usually grow with the records; they need not be unique.
func (p *Producer) Checkpoint() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	low := int64(0)
	for _, w := range p.mu.wins {
		if m := w.minProgress(); m > 0 && (low == 0 || m < low) {
			low = m
		}
	}
	if low > 0 {
		return low - 1
	}
	return p.mu.maxProg
}

// Buffered returns the bytes the producer holds for records not yet persisted.
func (p *Producer) Buffered() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.sh.buffered
}

// errClosing is the cause reported for what Close could not persist.
var errClosing = errors.New("producer closed before a checkpoint covered them")

// Close sends everything, waits until checkpoints cover every record or ctx ends, and
// stops. If some records were not persisted it returns an *UnpersistedError listing
// them: each is in the topic at most once.
func (p *Producer) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	p.mu.closed = true
	p.mu.Unlock()
	werr := p.flush(ctx, AckPersisted)
	p.cancel()
	p.mu.Lock()
	links := p.mu.every
	p.mu.Unlock()
	for _, l := range links {
		l.shutdown()
	}
	p.wg.Wait()
	p.admin.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	recs, err := p.unpersistedLocked()
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil
	}
	if werr == nil {
		werr = errClosing
	}
	return &UnpersistedError{Records: recs, Err: werr}
}

// refreshLocked starts a metadata refresh unless one is running: the topic's version or
// partition addresses changed.
func (p *Producer) refreshLocked() {
	if p.mu.refreshes || p.ctx.Err() != nil {
		return
	}
	p.mu.refreshes = true
	p.wg.Add(1)
	go p.refresh()
}

func (p *Producer) refresh() {
	defer p.wg.Done()
	for delay := p.cfg.backoffMin; ; delay = min(2*delay, p.cfg.backoffMax) {
		t, err := p.admin.topic(p.ctx, p.topic)
		p.mu.Lock()
		if err == nil {
			p.applyTopicLocked(t)
		}
		if err != nil || !p.behindLocked() || p.ctx.Err() != nil {
			p.mu.refreshes = false
			p.mu.Unlock()
			return // the next answer that needs it asks again
		}
		p.mu.Unlock()
		// A partition said the topic is newer than the metadata shows (a broker that
		// has not read the expansion yet): ask again.
		if sleepCtx(p.ctx, jitter(delay)) != nil {
			p.mu.Lock()
			p.mu.refreshes = false
			p.mu.Unlock()
			return
		}
	}
}

// behindLocked reports whether a window learned of a topic version that the metadata
// the producer follows does not show yet.
func (p *Producer) behindLocked() bool {
	known := p.mu.version
	if p.mu.next != nil {
		known = p.mu.next.Version
	}
	for _, w := range p.mu.wins {
		if w.newer > known {
			return true
		}
	}
	return false
}

// applyTopicLocked takes new metadata: moved partitions go to their new broker; more
// partitions at a newer version is an expansion, which the producer follows
// (producer_expand.go). Metadata older than what the producer follows (a broker behind)
// is ignored.
func (p *Producer) applyTopicLocked(t wire.Topic) {
	switch {
	case t.Version < p.mu.version || len(t.Partitions) < len(p.mu.wins):
		return
	case t.Version > p.mu.version && len(t.Partitions) > len(p.mu.wins):
		p.applyAddrsLocked(t)
		p.expandLocked(t)
		return
	case len(t.Partitions) != len(p.mu.wins):
		return // the same version with another count: not a layout this producer knows
	}
	p.applyAddrsLocked(t)
}

// applyAddrsLocked moves the windows of partitions that moved to their new broker.
func (p *Producer) applyAddrsLocked(t wire.Topic) {
	for i, part := range t.Partitions {
		if i >= len(p.mu.wins) {
			break
		}
		w := p.mu.wins[i]
		if l := p.mu.links[i]; part.Addr != "" && part.Addr != l.addr {
			w.connLost(p.now())
			w.pollLost()
			p.mu.links[i] = p.linkLocked(part.Addr)
		}
		p.mu.links[i].wake()
	}
	p.retireIdleLocked()
}

// retireIdleLocked stops the links that serve no partition any more: a broker whose
// partitions all moved, or a partition's empty address (none yet) once it has one. A
// link's sender redials its broker until the producer closes, and asks for the metadata
// every third failure: kept, a producer would do that for every broker it ever lost.
// A partition that moves back gets a new link.
func (p *Producer) retireIdleLocked() {
	var keep []*link // a new array: Close ranges over the old one without the lock
	for _, l := range p.mu.every {
		if slices.Contains(p.mu.links, l) {
			keep = append(keep, l)
			continue
		}
		l.stop()
		l.shutdown()
	}
	p.mu.every = keep
}

// minProgress returns the smallest positive progress number of the records the window
// holds, 0 if none has one.
func (w *window) minProgress() int64 {
	low := int64(0)
	for _, b := range w.q {
		if b.minProg > 0 && (low == 0 || b.minProg < low) {
			low = b.minProg
		}
	}
	for _, pr := range w.openProg {
		if pr > 0 && (low == 0 || pr < low) {
			low = pr
		}
	}
	return low
}

// unpersistedLocked returns copies of the records the windows still hold, once the
// senders have stopped.
func (p *Producer) unpersistedLocked() ([]Record, error) {
	var out []Record
	var d codec.Decompressor
	var it batch.Iter
	for _, w := range p.mu.wins {
		w.seal()
		for _, b := range w.q {
			if err := d.Iter(&it, b.buf); err != nil {
				return out, fmt.Errorf("BUG: cannot read back a produced batch: %w", err)
			}
			for i := 0; it.Next(); i++ {
				out = append(out, copyRecord(it.Record(), b.prog, i))
			}
			if err := it.Err(); err != nil {
				return out, fmt.Errorf("BUG: cannot read back a produced batch: %w", err)
			}
		}
	}
	return out, nil
}

// copyRecord copies the i-th record of a batch into a Record that owns its bytes.
func copyRecord(r *batch.Record, prog []int64, i int) Record {
	out := Record{Key: clone(r.Key), Value: clone(r.Value), Timestamp: r.Timestamp,
		Logical: r.Logical, UseLogical: true}
	if prog != nil {
		out.Progress = prog[i]
	}
	for hi := r.HeaderIter(); ; {
		h, ok := hi.Next()
		if !ok {
			break
		}
		out.Headers = append(out.Headers, batch.RecordHeader{Key: clone(h.Key), Value: clone(h.Value)})
	}
	return out
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
