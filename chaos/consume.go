package chaos

import (
	"context"
	"fmt"
	"time"

	"sluice/chaos/check"
	"sluice/client"
)

// reader records what a consumer reads into the history, each position once.
type reader struct {
	topic string
	addrs func() []string
	hist  *check.History
	next  map[int]int64 // per partition, the offset after the last one recorded
}

// poll reads one round from c and records it; it returns the consumer's error, if any.
func (rd *reader) poll(ctx context.Context, c *client.Consumer) error {
	if err := c.Poll(ctx); err != nil {
		return fmt.Errorf("cannot poll: %w", err)
	}
	for c.Next() {
		r, part := c.Record(), c.Partition()
		if r.Offset < rd.next[part] { // a new consumer reads again from the oldest
			continue
		}
		rd.next[part] = r.Offset + 1
		rd.hist.Read(check.ReadOf(part, r.Offset, r.Value, r.Offset <= c.Checkpoint()))
	}
	if err := c.Err(); err != nil {
		return fmt.Errorf("cannot read: %w", err)
	}
	return nil
}

// live consumes from the oldest record while the faults run, until ctx ends. A
// consumer that fails (a damaged batch, a broker gone for long) is replaced by a new one
// from the oldest; positions already recorded are skipped.
func (rd *reader) live(ctx context.Context, log func(string, ...any)) {
	for ctx.Err() == nil {
		c, err := client.NewConsumer(ctx, rd.topic, client.Brokers(rd.addrs()...), client.Start(client.Oldest()),
			client.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		for ctx.Err() == nil {
			if err := rd.poll(ctx, c); err != nil {
				if ctx.Err() == nil {
					log("live consumer replaced: %v", err)
				}
				break
			}
		}
		c.Close()
	}
}

// readBack waits until every partition's checkpoint covers its high watermark, then
// reads the whole topic from the oldest record with a new consumer, recording every
// read. It fails when that does not happen within limit.
func readBack(ctx context.Context, topic string, addrs []string, hist *check.History, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	a, err := client.NewAdmin(client.Brokers(addrs...))
	if err != nil {
		return fmt.Errorf("cannot read back: %w", err)
	}
	defer a.Close()
	var ends map[int]int64
	for {
		ends, err = durableEnds(ctx, a, topic)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("cannot read back: %w (last: %v)", ctx.Err(), err)
		}
		sleep(ctx, 200*time.Millisecond)
	}
	c, err := client.NewConsumer(ctx, topic, client.Brokers(addrs...), client.Start(client.Oldest()),
		client.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return fmt.Errorf("cannot read back: %w", err)
	}
	defer c.Close()
	rd := &reader{topic: topic, hist: hist, next: map[int]int64{}}
	for !reached(c, ends) {
		if err := rd.poll(ctx, c); err != nil {
			return fmt.Errorf("cannot read back: %w", err)
		}
	}
	return nil
}

// durableEnds returns each partition's high watermark once its checkpoint covers it.
func durableEnds(ctx context.Context, a *client.Admin, topic string) (map[int]int64, error) {
	d, err := a.DescribeTopic(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("cannot describe %s: %w", topic, err)
	}
	ends := map[int]int64{}
	for i, p := range d.Partitions {
		if p.Checkpoint < p.NextOffset-1 {
			return nil, fmt.Errorf("partition %d: checkpoint %d below high watermark %d", i, p.Checkpoint, p.NextOffset)
		}
		ends[i] = p.NextOffset
	}
	return ends, nil
}

// reached reports whether c's position is at ends in every partition.
func reached(c *client.Consumer, ends map[int]int64) bool {
	for p, end := range ends {
		if pos, _ := c.Position(p); pos < end {
			return false
		}
	}
	return true
}
