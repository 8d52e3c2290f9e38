package client

import (
	"context"
	"fmt"
	"slices"

	"sluice/wire"
)

// startAtTime sets the start of every partition to the first record stamped at or after
// millis (Unix ms), with one list_offsets request per partition, pipelined on each
// broker's connection: one round trip. The broker answers the base offset of the first
// batch whose max timestamp is at least millis (from its time index), or the high
// watermark when no batch is that recent; the consumer fetches from that offset and
// passes the records at the head of that batch stamped before millis (cursor.skipOlder).
// A partition no broker serves yet (moving, or new and not placed) is asked once it has
// one (p.timeStart, followAddresses): until then it is not fetched, and holds up no
// other.
func (c *Consumer) startAtTime(ctx context.Context, millis int64) error {
	var routed []*cpart
	for _, p := range c.parts {
		if c.positioned(p) {
			continue
		}
		if p.timeStart = p.addr == ""; !p.timeStart {
			routed = append(routed, p)
		}
	}
	return c.listOffsets(ctx, timeOffset(millis), routed, func(p *cpart, body *wire.ListOffsetsResponse) {
		p.startAt(millis, body)
	})
}

// timeOffset is the list_offsets timestamp that asks for millis.
func timeOffset(millis int64) int64 {
	if millis < 0 {
		return wire.TimestampEarliest // before 1970: every record is at or after it
	}
	return millis
}

// startAt sets p's start from the answer to a list_offsets for the time millis.
func (p *cpart) startAt(millis int64, body *wire.ListOffsetsResponse) {
	p.cur = cursor{next: body.Offset}
	if body.Offset < body.HighWatermark {
		p.cur.skipOlder, p.cur.skipping = millis, true
	}
	p.timeStart = false
}

// startLate asks for the start at the consumer's time of a partition that had no broker
// when the consumer started (startAtTime), now that it has one. A failure is not
// reported: it is asked again at the next look.
func (c *Consumer) startLate(ctx context.Context, p *cpart) {
	millis := c.cfg.start.millis
	_ = c.listOffsets(ctx, timeOffset(millis), []*cpart{p}, func(p *cpart, body *wire.ListOffsetsResponse) {
		p.startAt(millis, body)
	})
}

// startAtEnds sets the start of every partition served by a broker from that broker's
// log start and high watermark (a list_offsets for the latest offset answers both): the
// newest record, or the offset asked for within those bounds. A broker in a cluster
// describes only the partitions it serves (the others' offsets are 0 in its answer). A
// partition no broker serves (moving, or new and not placed yet) keeps what the
// description said, so that it holds up no other (it is fetched once it has a broker).
func (c *Consumer) startAtEnds(ctx context.Context) error {
	var routed []*cpart
	for _, p := range c.parts {
		if p.addr != "" && !c.positioned(p) {
			routed = append(routed, p)
		}
	}
	s := c.cfg.start
	return c.listOffsets(ctx, wire.TimestampLatest, routed, func(p *cpart, body *wire.ListOffsetsResponse) {
		p.cur = cursor{next: body.HighWatermark}
		if s.kind == startOffset {
			p.cur.next = within(s.offset, body)
		}
	})
}

// within returns off clamped to what the partition of body holds: from its log start to
// its high watermark.
func within(off int64, body *wire.ListOffsetsResponse) int64 {
	return min(max(off, body.LogStartOffset), body.HighWatermark)
}

// positioned reports whether StartPositions names p: it starts there, whatever Start
// says.
func (c *Consumer) positioned(p *cpart) bool {
	_, ok := c.cfg.positions[p.id]
	return ok
}

// checkPositions refuses StartPositions naming a partition the consumer does not read:
// one the topic does not have, or outside its LogicalRange.
func (c *Consumer) checkPositions() error {
	for id := range c.cfg.positions {
		if !slices.ContainsFunc(c.parts, func(p *cpart) bool { return p.id == id }) {
			return fmt.Errorf("StartPositions names partition %d of %s, which this consumer does not read", id, c.topic)
		}
	}
	return nil
}

// startAtPositions sets the start of each partition StartPositions names to its offset,
// clamped to the log start and high watermark its broker answers (a list_offsets for the
// latest offset gives both). One no broker serves yet (moving, or new and not placed)
// starts at the offset as given, not below 0.
func (c *Consumer) startAtPositions(ctx context.Context) error {
	var routed []*cpart
	for _, p := range c.parts {
		if off, ok := c.cfg.positions[p.id]; ok {
			p.cur, p.timeStart = cursor{next: max(off, 0)}, false
			if p.addr != "" {
				routed = append(routed, p)
			}
		}
	}
	return c.listOffsets(ctx, wire.TimestampLatest, routed, func(p *cpart, body *wire.ListOffsetsResponse) {
		p.cur = cursor{next: within(c.cfg.positions[p.id], body)}
	})
}

// listOffsets asks each partition of parts for the offset at ts, pipelined on each
// broker's connection, and hands every answer to set.
func (c *Consumer) listOffsets(ctx context.Context, ts int64, parts []*cpart, set func(*cpart, *wire.ListOffsetsResponse)) error {
	var order []*rpcConn
	for _, p := range parts {
		rc, err := c.conn(ctx, p.addr)
		if err != nil {
			return c.startFailed(p, err)
		}
		rc.queue(&wire.ListOffsetsRequest{Topic: c.topicB, Partition: uint32(p.id), Timestamp: ts})
		order = append(order, rc)
	}
	for i, p := range parts {
		if err := c.flushOnce(ctx, order[i]); err != nil {
			return c.startFailed(p, err)
		}
	}
	for i, p := range parts {
		resp, err := order[i].read(ctx)
		if err == nil {
			err = resp.Err()
		}
		if err != nil {
			return c.startFailed(p, err)
		}
		set(p, resp.Body.(*wire.ListOffsetsResponse))
	}
	return nil
}

// flushOnce sends what rc has queued, if anything (several partitions share a
// connection).
func (c *Consumer) flushOnce(ctx context.Context, rc *rpcConn) error {
	if len(rc.wbuf) == 0 {
		return nil
	}
	return rc.flush(ctx)
}

// startFailed drops the connections, whose streams are in an unknown state, and wraps
// err.
func (c *Consumer) startFailed(p *cpart, err error) error {
	c.dropConns()
	return fmt.Errorf("cannot find the start offset in %s/%d: %w", c.topic, p.id, err)
}
