package bench

import (
	"cmp"
	"context"
	"errors"
	"time"

	"sluice/batch"
	"sluice/client"
	"sluice/wire"
)

// The sluice driver uses the Go client. Its producer does not report per-record
// acknowledgments (Produce is asynchronous; Flush waits until the broker accepted
// everything), so produce runs report throughput only and latency comes from e2e runs.
func init() {
	register("sluice", func(addr string) (Driver, error) { return &sluiceDriver{addr: addr}, nil })
}

type sluiceDriver struct{ addr string }

// bufferBytesDefault is the sluice producer's bound of the bytes it holds until they are
// durable (they are sent again if the broker fails first) when Config.BufferBytes is 0:
// half of the suite broker's 4 GiB arena, the broker's own bound on what is not durable
// yet. Kafka's producer lets a record go on the leader's answer and the page cache
// absorbs the disk's stalls; this producer keeps a record until it is on disk, so its
// buffer is what absorbs them. At 256 MiB (the default before) a disk stall of a second
// on the shared hosts blocked the producer at 287 MB/s (the broker's pending bytes
// climbed 23 → 268 MB and the e2e run's schedule stage reached 1.03 s at p99), and the
// run measured the disk, not the path of a record.
const bufferBytesDefault = 2 << 30

// opts returns the options of a client of the run: the broker, the run's SluiceOpts,
// then more (a new slice each time: producers and consumers start concurrently).
func (d *sluiceDriver) opts(c *Config, more ...client.Opt) []client.Opt {
	return append(append([]client.Opt{client.Brokers(d.addr)}, c.SluiceOpts...), more...)
}

func (d *sluiceDriver) Prepare(ctx context.Context, c *Config) error {
	a, err := client.NewAdmin(d.opts(c)...)
	if err != nil {
		return err
	}
	defer a.Close()
	_, err = a.CreateTopic(ctx, c.Topic, c.Partitions, wire.TopicOptions{RetentionBytes: c.RetentionBytes, SegmentBytes: c.SegmentBytes})
	if client.IsCode(err, wire.CodeTopicExists) {
		return nil
	}
	return err
}

func (d *sluiceDriver) NewProducer(ctx context.Context, c *Config) (Producer, error) {
	codec, err := CodecOf(c.Compression)
	if err != nil {
		return nil, err
	}
	p, err := client.NewProducer(ctx, c.Topic, d.opts(c, client.BatchBytes(c.BatchBytes), client.MaxRequestBytes(max(c.BatchBytes, 4<<20)),
		client.Linger(c.Linger), client.Compression(codec), client.MaxBufferedBytes(cmp.Or(c.BufferBytes, bufferBytesDefault)))...)
	if err != nil {
		return nil, err
	}
	return &sluiceProducer{p: p}, nil
}

type sluiceProducer struct {
	p  *client.Producer
	r  client.Record
	rs []client.Record // SendBatch's
}

func (p *sluiceProducer) Send(ctx context.Context, v []byte, _ func(error)) error {
	p.r.Value = v
	return p.p.Produce(ctx, &p.r)
}

// SendBatch produces values with one ProduceBatch (BatchSender).
func (p *sluiceProducer) SendBatch(ctx context.Context, values [][]byte) (int, error) {
	if cap(p.rs) < len(values) {
		p.rs = make([]client.Record, len(values))
	}
	p.rs = p.rs[:len(values)]
	for i, v := range values {
		p.rs[i].Value = v
	}
	return p.p.ProduceBatch(ctx, p.rs)
}

func (p *sluiceProducer) Acks() bool { return false }

// Stages returns the client's stages (stageReporter).
func (p *sluiceProducer) Stages() map[string]*Latency {
	s := p.p.Stages()
	return map[string]*Latency{stageClientQueue: latencyOf(s.Queue.Count(), s.Queue.Quantile),
		stageRoundTrip: latencyOf(s.RoundTrip.Count(), s.RoundTrip.Quantile)}
}

func (p *sluiceProducer) ResetStages() { p.p.ResetStages() }

func (p *sluiceProducer) Flush(ctx context.Context) error { return p.p.Flush(ctx) }

func (p *sluiceProducer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return p.p.Close(ctx)
}

func (d *sluiceDriver) NewConsumer(ctx context.Context, c *Config, i, n int) (Consumer, error) {
	start := client.Newest()
	if c.FromStart {
		start = client.Oldest()
	}
	// The client's default byte budget (1 MiB) unless the run asks for another: it
	// consumed 1.2x faster than 4 MiB (the harness's budget before) from memory and from
	// the page cache, three alternating rounds each of 3 M records of 1 KiB, 4
	// partitions (BENCHMARKS.md): an answer that fits the caches is read faster. The long
	// poll is 100 ms instead of 500 ms so that a run's last poll ends sooner; it changes
	// nothing while records flow (the broker answers as soon as it has some).
	opts := d.opts(c, client.Start(start), client.FetchMaxWait(100*time.Millisecond))
	if c.FetchBytes > 0 {
		opts = append(opts, client.FetchMaxBytes(c.FetchBytes))
	}
	if n > 1 {
		lo := i * wire.LogicalPartitions / n
		hi := (i+1)*wire.LogicalPartitions/n - 1
		opts = append(opts, client.LogicalRange(uint16(lo), uint16(hi)))
	}
	cs, err := client.NewConsumer(ctx, c.Topic, opts...)
	if err != nil {
		return nil, err
	}
	return &sluiceConsumer{c: cs}, nil
}

type sluiceConsumer struct {
	c       *client.Consumer
	arrived int64 // when the last Poll returned (Arrivals)
}

// Arrived returns when the Poll that brought the current record returned (Unix ns).
func (c *sluiceConsumer) Arrived() int64 { return c.arrived }

func (c *sluiceConsumer) Run(ctx context.Context, fn func([]byte) bool) error {
	for {
		if err := c.c.Poll(ctx); err != nil {
			if ctx.Err() != nil || errors.Is(err, client.ErrClosed) {
				return nil
			}
			return err
		}
		c.arrived = time.Now().UnixNano()
		for c.c.Next() {
			var r *batch.Record = c.c.Record()
			if !fn(r.Value) {
				return nil
			}
		}
		if err := c.c.Err(); err != nil {
			return err
		}
	}
}

func (c *sluiceConsumer) Close() error { return c.c.Close() }

func (d *sluiceDriver) Close() error { return nil }
