package client

import (
	"context"
	"fmt"

	"sluice/batch"
	"sluice/wire"
)

// offsetForTime returns the offset of the first record whose timestamp is at least ts in
// partition p, whose offsets are [lo, hi). The wire protocol has no time index lookup, so
// this is a binary search over batches: each probe fetches the one batch holding an
// offset and reads its max timestamp. It finds the first batch whose max timestamp is at
// least ts (exact when timestamps do not decrease along the log), then the first record
// in it at or after ts.
func (c *Consumer) offsetForTime(ctx context.Context, p *cpart, lo, hi, ts int64) (int64, error) {
	rc, err := c.conn(ctx, p.addr)
	if err != nil {
		return 0, err
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		h, err := c.probe(ctx, rc, p, mid)
		if err != nil {
			return 0, err
		}
		if h.MaxTimestamp >= ts {
			hi = h.BaseOffset
		} else {
			lo = h.LastOffset() + 1
		}
	}
	return c.firstAtOrAfter(ctx, rc, p, lo, ts)
}

// probe returns the header of the batch holding offset off.
func (c *Consumer) probe(ctx context.Context, rc *rpcConn, p *cpart, off int64) (batch.Header, error) {
	records, err := c.fetchOne(ctx, rc, p, off)
	if err != nil {
		return batch.Header{}, err
	}
	h, err := batch.ParseHeader(records)
	if err != nil {
		return h, fmt.Errorf("cannot find offset for time in %s/%d: %w", c.topic, p.id, err)
	}
	return h, nil
}

// firstAtOrAfter returns the offset of the first record at or after off with a timestamp
// of at least ts, looking at the batch holding off only (off itself if none does).
func (c *Consumer) firstAtOrAfter(ctx context.Context, rc *rpcConn, p *cpart, off, ts int64) (int64, error) {
	records, err := c.fetchOne(ctx, rc, p, off)
	if err != nil || len(records) == 0 {
		return off, err
	}
	var ri recordIter
	pos := off
	ri.hi = wire.LogicalPartitions - 1
	ri.reset(records, &pos)
	for ri.next() {
		if ri.rec.Timestamp >= ts {
			return ri.rec.Offset, nil
		}
	}
	if ri.err != nil {
		return 0, ri.err
	}
	return pos, nil
}

// fetchOne fetches the batch holding off, without waiting; no records at the end.
func (c *Consumer) fetchOne(ctx context.Context, rc *rpcConn, p *cpart, off int64) ([]byte, error) {
	resp, err := rc.call(ctx, &wire.FetchRequest{Topic: c.topicB, Partition: uint32(p.id), Offset: off, MaxBytes: 1})
	if err != nil {
		return nil, fmt.Errorf("cannot fetch %s/%d at %d: %w", c.topic, p.id, off, err)
	}
	if err := resp.Err(); err != nil {
		return nil, fmt.Errorf("cannot fetch %s/%d at %d: %w", c.topic, p.id, off, err)
	}
	return resp.Body.(*wire.FetchResponse).Records, nil
}
