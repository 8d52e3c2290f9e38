package engine

import (
	"errors"

	"sluice/memarena"
	"sluice/persist/local"
)

// FetchResult holds whole batches for a consumer: either held arena spans (memory) or a
// held segment region (for sendfile), never both. The caller releases it once written.
type FetchResult struct {
	Window
	// Spans are the batches from memory, in order.
	Spans []memarena.Span
	// Region is the batches from a segment file when they were not in memory.
	Region local.Region
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
// slice's capacity.
func (r *FetchResult) Release() {
	r.Spans = memarena.ReleaseAll(r.Spans)
	r.Region.Release()
}

// Fetch returns whole batches starting with the one that holds offset, up to maxBytes
// (at least one batch), from memory when the write buffer still has them, else from the
// log. An offset equal to the end returns no batches (the driver may park the request
// until data arrives); one outside the log returns local.ErrOffsetOutOfRange. dst lends
// its capacity for the spans, so a driver reusing it allocates nothing.
func (p *Partition) Fetch(offset int64, maxBytes int, dst []memarena.Span) (FetchResult, error) {
	res := FetchResult{Spans: dst[:0]}
	if offset >= p.log.Start() && offset < p.log.Next() {
		spans, err := p.buf.Read(offset, maxBytes, res.Spans)
		switch {
		case err == nil && len(spans) > 0:
			p.hits.Add(1)
			res.Spans = spans
			res.Window = p.Window()
			return res, nil
		case err != nil && !errors.Is(err, memarena.ErrMiss):
			return res, err
		}
		p.misses.Add(1)
	}
	r, err := p.log.ReadRegion(offset, int64(maxBytes))
	if err != nil {
		return res, err
	}
	res.Region = r
	res.Window = p.Window()
	return res, nil
}
