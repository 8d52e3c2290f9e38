package engine

import (
	"fmt"

	"sluice/batch"
)

// ProduceResult answers a produce request.
type ProduceResult struct {
	Window
	// Base and Last are the offsets of the first and last record of the request's batches
	// (for duplicates, the offsets they got the first time); -1 when the request was empty
	// or only held batches older than the dedup window.
	Base, Last int64
	// Duplicates counts batches that were already in the log and were not appended again.
	Duplicates int
	// Appended counts batches appended by this request (a failed request may have
	// appended a prefix), and AppendedBytes their bytes.
	Appended      int
	AppendedBytes int
}

// Target returns the offset C must cover before the request is durable: its last offset,
// or, for an empty produce or one of old duplicates only, everything accepted so far.
func (r *ProduceResult) Target() int64 {
	if r.Base < 0 {
		return r.Next - 1
	}
	return r.Last
}

// Produce checks the window and appends the request's batches (whole batches back to back,
// as they arrived; their base offsets are overwritten). An empty request only reports the
// window. Every batch is validated (header, CRC, producer sequence) before any is
// appended, so a request is appended whole or not at all, except that a storage failure
// midway leaves a prefix appended (reported in the result with the error). Whenever
// anything was appended, every parked fetch wakes. Owner only.
//
// Errors: *WindowError, ErrDamaged, ErrInvalidBatch, ErrOutOfOrderSequence,
// memarena.ErrFull (the throttle: nothing was appended; retry after the checkpoint
// advances), or a storage error (persist.ErrNoSpace: nothing more was appended, the
// partition stays usable).
func (p *Partition) Produce(v uint32, s uint64, batches []byte) (ProduceResult, error) {
	res := ProduceResult{Base: -1, Last: -1}
	err := p.produce(v, s, batches, &res)
	if res.Appended > 0 {
		p.waits.wakeAll(&p.waits.fetches, WokeData)
	}
	p.Checkpointed() // policies that sync on append (or never) moved C already
	res.Window = p.Window()
	return res, err
}

func (p *Partition) produce(v uint32, s uint64, batches []byte, res *ProduceResult) error {
	if err := p.CheckWindow(v, s); err != nil {
		return err
	}
	if err := p.Damage(); err != nil && len(batches) > 0 {
		return err
	}
	if err := p.validate(batches); err != nil {
		return err
	}
	for rest := batches; len(rest) > 0; {
		h, _ := batch.ParseHeader(rest) // validated above
		b := rest[:h.Size()]
		rest = rest[h.Size():]
		base, last, dup, err := p.appendOne(&h, b)
		if err != nil {
			return err
		}
		if dup {
			res.Duplicates++
		} else if base >= 0 {
			res.Appended++
			res.AppendedBytes += len(b)
		}
		if base >= 0 && res.Base < 0 {
			res.Base = base
		}
		if last >= 0 {
			res.Last = last
		}
	}
	return nil
}

// validate checks every batch and that the producers' sequences continue, without
// changing anything.
func (p *Partition) validate(batches []byte) error {
	// Sequences continue across the batches of one request too: track the last seen.
	var pending map[int64]int32
	for pos := 0; pos < len(batches); {
		h, err := batch.Check(batches[pos:])
		if err != nil {
			return fmt.Errorf("%w at byte %d of the request: %w", ErrInvalidBatch, pos, err)
		}
		if idempotent(&h) {
			if last, ok := pending[h.ProducerID]; ok {
				if h.BaseSequence != last+1 {
					return fmt.Errorf("%w: producer %d sent %d after %d in one request", ErrOutOfOrderSequence, h.ProducerID, h.BaseSequence, last)
				}
			} else if verdict, _ := p.producers[h.ProducerID].check(&h); verdict == seqGap {
				return fmt.Errorf("%w: producer %d sent sequence %d, expected %d", ErrOutOfOrderSequence,
					h.ProducerID, h.BaseSequence, p.producers[h.ProducerID].lastSeq()+1)
			}
			if pending == nil {
				pending = map[int64]int32{}
			}
			pending[h.ProducerID] = h.BaseSequence + int32(h.Count) - 1
		}
		pos += h.Size()
	}
	return nil
}

// appendOne appends one validated batch, unless it is a duplicate. It copies the batch
// into the write buffer first: when the arena is full that is the throttle, and nothing
// has reached the store.
func (p *Partition) appendOne(h *batch.Header, b []byte) (base, last int64, dup bool, err error) {
	if idempotent(h) {
		switch verdict, prev := p.producers[h.ProducerID].check(h); verdict {
		case seqDuplicate:
			return prev.base, prev.last, true, nil
		case seqOld:
			return -1, -1, true, nil
		}
	}
	_, base = p.store.Bounds()
	last = base + int64(h.Count) - 1
	batch.SetBaseOffset(b, base)
	if err := p.buf.Append(b, base, last); err != nil {
		return -1, -1, false, err
	}
	if got, err := p.store.Append(b); err != nil || got != base {
		if err == nil {
			err = fmt.Errorf("BUG: the store put it at offset %d", got)
		}
		return -1, -1, false, p.resetBuffer(fmt.Errorf("cannot append to %s/%d at offset %d: %w", p.topic, p.id, base, err))
	}
	p.remember(h, base, last)
	return base, last, false, nil
}

// resetBuffer replaces the write buffer with an empty one at the store's end after the
// store refused an append the buffer had taken, and returns cause.
func (p *Partition) resetBuffer(cause error) error {
	p.buf.Close()
	_, next := p.store.Bounds()
	buf, err := p.arena.NewWriteBuffer(next)
	if err != nil {
		return fmt.Errorf("%w; and cannot restart the write buffer: %w", cause, err)
	}
	p.buf = buf
	buf.SetDurable(p.store.Durable())
	return cause
}
