package engine

import (
	"errors"
	"fmt"

	"sluice/batch"
	"sluice/memarena"
	"sluice/persist"
)

// FetchResult holds whole batches for a consumer: either held arena spans (memory) or a
// held store region (for sendfile), never both. The caller releases it once written.
type FetchResult struct {
	Window
	// Spans are the batches from memory, in order.
	Spans []memarena.Span
	// Region is the batches from the store when they were not in memory.
	Region persist.Region
	// NextOffset follows the last batch held: the offset to fetch next (the offset asked
	// for when none is held).
	NextOffset int64
}

// Len returns the bytes of batches held.
func (r *FetchResult) Len() int64 {
	if len(r.Spans) == 0 {
		return r.Region.Len
	}
	var n int64
	for i := range r.Spans {
		n += int64(r.Spans[i].Len())
	}
	return n
}

// Release releases the spans or the region; the result may be reused with its Spans
// slice's capacity, and holds no bytes (Len 0) until then.
func (r *FetchResult) Release() {
	r.Spans = memarena.ReleaseAll(r.Spans)
	r.Region.Release()
}

// Fetch returns whole batches starting with the one that holds offset, up to maxBytes
// (at least one batch), from memory when the write buffer still has them, else from the
// store. An offset equal to the end returns no batches (the driver may park the request
// with ParkFetch); one outside the log returns persist.ErrOffsetOutOfRange; stored data
// that fails its checks returns a *persist.CorruptionError (never skipped). dst lends its
// capacity for the spans, so a driver reusing it allocates nothing. Owner only (the
// reads themselves are safe anywhere; the counters and the buffer's order are the
// owner's).
func (p *Partition) Fetch(offset int64, maxBytes int, dst []memarena.Span) (FetchResult, error) {
	res, _, err := p.fetch(offset, maxBytes, dst, false)
	return res, err
}

// FetchMemory is Fetch for a caller that must not wait for the disk (an event loop
// running the owner's work: sched.Shard.TryRun): it reads the write buffer only. ok is
// false, and nothing is held, when Fetch would have to ask the store: the records at
// offset are not in the buffer (reclaimed, or never there after a restart), or offset
// is outside the log (rare: let the owner's goroutine answer it). An offset equal to the
// end returns no batches, as Fetch does, without asking the store (unless the partition
// is damaged or closing: the store's answer says so). Owner only.
func (p *Partition) FetchMemory(offset int64, maxBytes int, dst []memarena.Span) (res FetchResult, ok bool, err error) {
	return p.fetch(offset, maxBytes, dst, true)
}

// fetch is Fetch, or FetchMemory when memoryOnly is set.
func (p *Partition) fetch(offset int64, maxBytes int, dst []memarena.Span, memoryOnly bool) (FetchResult, bool, error) {
	res := FetchResult{Spans: dst[:0], NextOffset: offset}
	start, next := p.bounds()
	if offset >= start && offset < next {
		spans, after, err := p.buf.ReadNext(offset, maxBytes, res.Spans)
		switch {
		case err == nil && len(spans) > 0:
			p.hits.Add(1)
			res.Spans, res.NextOffset = spans, after
			// An appender copies a batch into the buffer and then moves end: a read in
			// between may take that batch (its bytes are whole). It moves end itself, so
			// that the window it answers with covers the batch (records past the high
			// watermark are a malformed answer to the consumer) and a poll at after
			// parks rather than being answered empty.
			p.advanceEnd(after)
			res.Window = p.Window()
			return res, true, nil
		case err != nil && !errors.Is(err, memarena.ErrMiss):
			return res, true, err
		}
		if memoryOnly {
			return res, false, nil
		}
		p.misses.Add(1)
	}
	if memoryOnly {
		if offset != next || p.closing || p.Damage() != nil { // (the store answers those)
			return res, false, nil
		}
		res.Region, res.Window = persist.EmptyRegion(offset), p.Window()
		return res, true, nil
	}
	r, err := p.store.ReadRegion(offset, int64(maxBytes))
	if err != nil {
		return res, true, err
	}
	res.Region = r
	if r.Len > 0 {
		res.NextOffset = r.NextOffset
	}
	res.Window = p.Window()
	return res, true, nil
}

// OffsetForTime returns the base offset of the first batch whose max timestamp is at
// least ts (Unix ms), or the end when none is: from the store's time index for what is
// written, then from the write buffer's batch headers for what is not yet (the store
// answers where its written data ends when the batch is past it). It may read index
// files: the driver runs it on the owner, never on an event loop.
func (p *Partition) OffsetForTime(ts int64) (int64, error) {
	off, err := p.store.OffsetForTime(ts)
	if err != nil {
		return 0, err
	}
	start, next := p.bounds()
	off = min(max(off, start), next)
	var hb [batch.HeaderSize]byte
	for off < next {
		spans, err := p.buf.Read(off, 1, nil) // the one batch holding off
		if err != nil || len(spans) == 0 {
			return off, nil // not in memory: written, so the store's answer is exact
		}
		n := 0
		for i := range spans {
			n += copy(hb[n:], spans[i].Bytes())
		}
		memarena.ReleaseAll(spans)
		h, err := batch.ParseHeader(hb[:n])
		if err != nil {
			return 0, fmt.Errorf("cannot read batch header at offset %d in memory: %w", off, err)
		}
		if h.MaxTimestamp >= ts {
			return h.BaseOffset, nil
		}
		off = h.LastOffset() + 1
	}
	return next, nil
}
