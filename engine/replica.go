package engine

import (
	"errors"

	"sluice/memarena"
)

// The replica. In distributed mode a partition's batches are also shipped to a remote
// tier (HDFS: persist/hdfs), by a shipper of the driver's, and the checkpoint C the
// partition reports, and that produces with acks=persisted wait for, is the last offset
// both durable in the local store and acknowledged by the replica. The write buffer
// still reclaims by the local store's checkpoint alone: what the replica has not taken
// by then is read back from the local segments (ShipRead), so an outage of the replica
// fills the local disk, not memory, before producers are refused. Local retention never
// deletes what the replica has not acknowledged.

// Replicated reports whether C waits for a replica. Any goroutine.
func (p *Partition) Replicated() bool { return p.replicated }

// Shipped records that the replica acknowledged every batch below next. It never moves
// back. Any goroutine; the driver then has the owner call Checkpointed.
func (p *Partition) Shipped(next int64) {
	for {
		cur := p.shipped.Load()
		if next <= cur || p.shipped.CompareAndSwap(cur, next) {
			return
		}
	}
}

// LocalStart returns the first offset the local store holds: a fetch below it (and at
// or above Window.Start) is for the replica. Any goroutine.
func (p *Partition) LocalStart() int64 {
	start, _ := p.store.Bounds()
	return start
}

// ShippedNext returns the offset below which the replica acknowledged everything.
// Any goroutine.
func (p *Partition) ShippedNext() int64 { return p.shipped.Load() }

// checkpoint returns C: the store's durable offset, bounded by the replica's
// acknowledgment in distributed mode. Any goroutine.
func (p *Partition) checkpoint() int64 {
	d := p.store.Durable()
	if p.replicated {
		d = min(d, p.shipped.Load()-1)
	}
	return d
}

// ShipRead returns whole batches from the one holding offset on, up to maxBytes but at
// least one batch, for the shipper: from memory when the write buffer still has them
// (every batch not yet written locally is there), else from the store (a region to
// read). A batch may reach the replica before the local disk: C waits for both, and
// after a crash that lost it locally the partition continues below it in a new epoch,
// which fences the replica's copy (persist/hdfs). An offset at the end returns nothing.
// It counts no reads (the shipper is not a consumer). Any goroutine.
func (p *Partition) ShipRead(offset int64, maxBytes int, dst []memarena.Span) (FetchResult, error) {
	res := FetchResult{Spans: dst[:0]}
	if _, next := p.bounds(); offset >= next {
		return res, nil
	}
	spans, err := p.buf.Read(offset, maxBytes, res.Spans)
	switch {
	case err == nil && len(spans) > 0:
		res.Spans = spans
		return res, nil
	case err != nil && !errors.Is(err, memarena.ErrMiss):
		return res, err
	}
	r, err := p.store.ReadRegion(offset, int64(maxBytes))
	if err != nil {
		return res, err
	}
	res.Region = r
	return res, nil
}
