package chaos

import (
	"context"
	"fmt"
	"time"

	"sluice/chaos/check"
	"sluice/client"
	"sluice/wire"
)

// reader records what a consumer reads into the history, each position once.
type reader struct {
	topic string
	addrs func() []string
	hist  *check.History
	next  map[int]int64 // per partition, the offset after the last one recorded
	prog  *progress     // the live consumer's: when it last read each partition (nil: not kept)
}

// poll reads one round from c and records it; it returns the consumer's error, if any.
func (rd *reader) poll(ctx context.Context, c *client.Consumer) error {
	if err := c.Poll(ctx); err != nil {
		return fmt.Errorf("cannot poll: %w", err)
	}
	noted, now := -1, time.Now().UnixNano()
	for c.Next() {
		r, part := c.Record(), c.Partition()
		if rd.prog != nil && part != noted {
			rd.prog.readFrom(part, now)
			noted = part
		}
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
	var ends map[int]int64
	var err error
	for {
		ends, err = durableEnds(ctx, topic, addrs)
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

// durableEnds returns each partition's high watermark once its checkpoint covers it,
// asking each partition's own broker (the metadata of the brokers at addrs names it:
// another broker does not know a partition's state).
func durableEnds(ctx context.Context, topic string, addrs []string) (map[int]int64, error) {
	d, err := describe(ctx, topic, addrs)
	if err != nil {
		return nil, err
	}
	ends := map[int]int64{}
	states := map[string]*wire.DescribeTopicResponse{}
	for i, p := range d.Partitions {
		if p.Addr == "" {
			return nil, fmt.Errorf("partition %d has no broker", i)
		}
		own := states[p.Addr]
		if own == nil {
			if own, err = describe(ctx, topic, []string{p.Addr}); err != nil {
				return nil, err
			}
			states[p.Addr] = own
		}
		st := own.Partitions[i]
		if st.Addr != p.Addr || st.Session == 0 {
			return nil, fmt.Errorf("partition %d: moving (owner %q, then %q)", i, p.Addr, st.Addr)
		}
		if st.Checkpoint < st.NextOffset-1 {
			return nil, fmt.Errorf("partition %d: checkpoint %d below high watermark %d", i, st.Checkpoint, st.NextOffset)
		}
		ends[i] = st.NextOffset
	}
	return ends, nil
}

// describe asks the brokers at addrs for the topic's state.
func describe(ctx context.Context, topic string, addrs []string) (*wire.DescribeTopicResponse, error) {
	a, err := client.NewAdmin(client.Brokers(addrs...))
	if err != nil {
		return nil, fmt.Errorf("cannot describe %s: %w", topic, err)
	}
	defer a.Close()
	d, err := a.DescribeTopic(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("cannot describe %s: %w", topic, err)
	}
	return d, nil
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
