package client

import (
	"context"
	"fmt"

	"sluice/wire"
)

// startAtTime sets the start of every partition to the first record stamped at or after
// millis (Unix ms), with one list_offsets request per partition, pipelined on each
// broker's connection: one round trip. The broker answers the base offset of the first
// batch whose max timestamp is at least millis (from its time index), or the high
// watermark when no batch is that recent; the consumer fetches from that offset and
// passes the records at the head of that batch stamped before millis (cursor.skipOlder).
func (c *Consumer) startAtTime(ctx context.Context, millis int64) error {
	ts := millis
	if ts < 0 {
		ts = wire.TimestampEarliest // before 1970: every record is at or after it
	}
	var order []*rpcConn
	for _, p := range c.parts {
		rc, err := c.conn(ctx, p.addr)
		if err != nil {
			return c.startFailed(p, err)
		}
		rc.queue(&wire.ListOffsetsRequest{Topic: c.topicB, Partition: uint32(p.id), Timestamp: ts})
		order = append(order, rc)
	}
	for i, p := range c.parts {
		if err := c.flushOnce(ctx, order[i]); err != nil {
			return c.startFailed(p, err)
		}
	}
	for i, p := range c.parts {
		resp, err := order[i].read(ctx)
		if err == nil {
			err = resp.Err()
		}
		if err != nil {
			return c.startFailed(p, err)
		}
		body := resp.Body.(*wire.ListOffsetsResponse)
		p.cur = cursor{next: body.Offset}
		if body.Offset < body.HighWatermark {
			p.cur.skipOlder, p.cur.skipping = millis, true
		}
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
	return fmt.Errorf("cannot find the offset for a time in %s/%d: %w", c.topic, p.id, err)
}
