package bench

import (
	"context"
	"sync"
	"testing"
	"time"
)

// partialBatcher takes whole chunks until it gets one of more than 3 records: of that one
// it takes 3 and then fails as sluiceProducer.SendBatch does when ProduceBatch's wait for
// room ends with the run's context (3 and the context's error). A stand-in for a
// system's client, to test the harness's own counting (from a hostile review).
type partialBatcher struct {
	cancel func()
	taken  int64
	failed bool
}

func (p *partialBatcher) Send(context.Context, []byte, func(error)) error { p.taken++; return nil }
func (p *partialBatcher) Acks() bool                                      { return false }
func (p *partialBatcher) Flush(context.Context) error                     { return nil }
func (p *partialBatcher) Close() error                                    { return nil }

func (p *partialBatcher) SendBatch(ctx context.Context, vs [][]byte) (int, error) {
	if len(vs) > 3 && !p.failed {
		p.failed = true
		p.taken += 3
		p.cancel() // the run's end, while the producer waited for room
		return 3, ctx.Err()
	}
	p.taken += int64(len(vs))
	return len(vs), nil
}

// TestProduceLoopCountsOnlyQueued: the records counted as sent are the records the
// driver queued. A chunk that failed part way (the run's context ending while
// ProduceBatch waits for room) was counted whole, so RunE2E reported records "sent but
// not consumed" that were never sent, and RunProduce over-counted.
func TestProduceLoopCountsOnlyQueued(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := &partialBatcher{cancel: cancel}
	var cnt Counters
	produceLoop(ctx, p, &Config{RecordSize: 1024}, newClock(), 1_000_000, 0, &cnt, nil)
	if !p.failed {
		t.Fatal("no chunk of more than 3 records was handed over")
	}
	if got := cnt.records.Load(); got != p.taken {
		t.Fatalf("counted %d records sent, the driver queued %d", got, p.taken)
	}
}

// stallDriver is a system whose consumer brings records in polls of up to 4, and spends
// stall between the first record of a poll and the next (as sluice's consumer decodes
// the next batch of a poll in Next, or the harness flushes its latencies). It records
// each record's true latency: the time fn got it minus its stamp.
type stallDriver struct {
	ch    chan []byte
	stall time.Duration
	mu    sync.Mutex
	sum   int64
	n     int64
}

func (d *stallDriver) Prepare(context.Context, *Config) error { return nil }
func (d *stallDriver) Close() error                           { return nil }
func (d *stallDriver) NewProducer(context.Context, *Config) (Producer, error) {
	return &chanProducer{ch: d.ch}, nil
}
func (d *stallDriver) NewConsumer(context.Context, *Config, int, int) (Consumer, error) {
	return &stallConsumer{d: d}, nil
}

type chanProducer struct{ ch chan []byte }

func (p *chanProducer) Send(_ context.Context, v []byte, _ func(error)) error {
	p.ch <- append([]byte(nil), v...)
	return nil
}
func (p *chanProducer) Acks() bool                  { return false }
func (p *chanProducer) Flush(context.Context) error { return nil }
func (p *chanProducer) Close() error                { return nil }

type stallConsumer struct {
	d       *stallDriver
	arrived int64
}

func (c *stallConsumer) Arrived() int64 { return c.arrived }
func (c *stallConsumer) Close() error   { return nil }

func (c *stallConsumer) Run(ctx context.Context, fn func([]byte) bool) error {
	clk := newClock()
	for {
		var poll [][]byte
		select {
		case v := <-c.d.ch:
			poll = append(poll, v)
		case <-ctx.Done():
			return nil
		}
		for wait := time.After(30 * time.Millisecond); len(poll) < 4; {
			select {
			case v := <-c.d.ch:
				poll = append(poll, v)
				continue
			case <-wait:
			case <-ctx.Done():
				return nil
			}
			break
		}
		c.arrived = time.Now().UnixNano()
		for i, v := range poll {
			if i == 1 {
				time.Sleep(c.d.stall)
			}
			c.d.mu.Lock()
			c.d.sum += clk.now() - stampOf(v)
			c.d.n++
			c.d.mu.Unlock()
			if !fn(v) {
				return nil
			}
		}
	}
}

// TestE2EStallWithinPoll: RunE2E's latencies match the records' true latencies
// when the consumer spends time between records of one poll. With the clock read at the
// first record of a poll and then every 16th, the records after the stall were given
// the time read before it (from a hostile review; the driver is a stand-in that stalls
// on purpose, which no real system does on demand).
func TestE2EStallWithinPoll(t *testing.T) {
	d := &stallDriver{ch: make(chan []byte, 1<<12), stall: 10 * time.Millisecond}
	c := Config{System: "stall", Topic: "t", RecordSize: 64, Rate: 200, Duration: 600 * time.Millisecond,
		Producers: 1, Consumers: 1, BatchBytes: 1 << 16}
	res, err := RunE2E(context.Background(), d, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	trueMean := float64(d.sum) / float64(d.n) / 1e3 // µs
	d.mu.Unlock()
	if res.Latency == nil || res.Latency.Mean < trueMean-1000 {
		t.Fatalf("mean latency measured %.0f µs, true mean %.0f µs (%+v)", res.Latency.Mean, trueMean, res.Latency)
	}
}
