package bench

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The Kafka driver uses franz-go. Producers: acks=1 (the leader appended the batch to
// its log, in the page cache; the broker is left at its default of no explicit fsync),
// idempotence off (which acks=1 requires), linger and batch size from the Config,
// compression from the Config. Keyless records go to partitions by franz-go's default
// sticky partitioner. Consumers read assigned partitions directly (no group), consumer i
// of n taking partitions i, i+n, ...
func init() {
	register("kafka", func(addr string) (Driver, error) { return &kafkaDriver{addr: addr}, nil })
}

type kafkaDriver struct{ addr string }

func (d *kafkaDriver) Close() error { return nil }

func (d *kafkaDriver) Prepare(ctx context.Context, c *Config) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, int32(c.Partitions), 1, kafkaTopicConfigs(c), c.Topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return err
	}
	if resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
		return resp.Err
	}
	return nil
}

// kafkaTopicConfigs maps the retention settings to topic configs: retention.bytes is per
// partition as in sluice; deleted segments go at once (file.delete.delay.ms, default a
// minute) so that the disk holds what retention says. The broker checks retention every
// 5 s (log.retention.check.interval.ms in KafkaServer).
func kafkaTopicConfigs(c *Config) map[string]*string {
	if c.RetentionBytes == 0 && c.SegmentBytes == 0 {
		return nil
	}
	str := func(v int64) *string { s := strconv.FormatInt(v, 10); return &s }
	m := map[string]*string{"file.delete.delay.ms": str(1000)}
	if c.RetentionBytes > 0 {
		m["retention.bytes"] = str(c.RetentionBytes)
	}
	if c.SegmentBytes > 0 {
		m["segment.bytes"] = str(c.SegmentBytes)
	}
	return m
}

func kafkaCodec(name string) kgo.CompressionCodec {
	switch name {
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

func (d *kafkaDriver) NewProducer(ctx context.Context, c *Config) (Producer, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.addr), kgo.DefaultProduceTopic(c.Topic),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.ProducerLinger(c.Linger), kgo.ProducerBatchMaxBytes(int32(c.BatchBytes)),
		kgo.MaxBufferedBytes(256<<20), kgo.ProducerBatchCompression(kafkaCodec(c.Compression)),
		kgo.RecordPartitioner(kgo.StickyPartitioner()))
	if err != nil {
		return nil, err
	}
	return &kafkaProducer{cl: cl}, nil
}

type kafkaProducer struct{ cl *kgo.Client }

// Send copies v: franz-go keeps the record's value until it is acknowledged.
func (p *kafkaProducer) Send(ctx context.Context, v []byte, ack func(error)) error {
	r := &kgo.Record{Value: append([]byte(nil), v...)}
	// The record lives until acknowledged, past the run's context: give it none.
	p.cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
		if ack != nil {
			ack(err)
		}
	})
	return nil
}

func (p *kafkaProducer) Acks() bool                      { return true }
func (p *kafkaProducer) Flush(ctx context.Context) error { return p.cl.Flush(ctx) }
func (p *kafkaProducer) Close() error                    { p.cl.Close(); return nil }

func (d *kafkaDriver) NewConsumer(ctx context.Context, c *Config, i, n int) (Consumer, error) {
	reset := kgo.NewOffset().AtEnd()
	if c.FromStart {
		reset = kgo.NewOffset().AtStart()
	}
	parts := map[int32]kgo.Offset{}
	for p := i; p < c.Partitions; p += n {
		parts[int32(p)] = reset
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.Topic: parts}),
		kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(8<<20), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return nil, err
	}
	return &kafkaConsumer{cl: cl}, nil
}

type kafkaConsumer struct {
	cl      *kgo.Client
	arrived int64 // when the last PollFetches returned (Arrivals)
}

// Arrived returns when the PollFetches that brought the current record returned.
func (c *kafkaConsumer) Arrived() int64 { return c.arrived }

func (c *kafkaConsumer) Run(ctx context.Context, fn func([]byte) bool) error {
	for {
		fs := c.cl.PollFetches(ctx)
		c.arrived = time.Now().UnixNano()
		if ctx.Err() != nil {
			return nil
		}
		var err error
		fs.EachError(func(_ string, _ int32, e error) { err = e })
		if err != nil {
			return err
		}
		stop := false
		fs.EachRecord(func(r *kgo.Record) {
			if !stop && !fn(r.Value) {
				stop = true
			}
		})
		if stop {
			return nil
		}
	}
}

func (c *kafkaConsumer) Close() error { c.cl.Close(); return nil }

// KafkaReady checks that the broker at addr really serves: it creates a topic, produces
// one record with acks=all and reads it back, retrying until ctx ends.
func KafkaReady(ctx context.Context, addr string) error {
	var err error
	for {
		if err = kafkaRoundTrip(ctx, addr); err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func kafkaRoundTrip(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	d := &kafkaDriver{addr: addr}
	c := &Config{Topic: "bench-ready", Partitions: 1}
	if err := d.Prepare(ctx, c); err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(c.Topic),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{c.Topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return err
	}
	defer cl.Close()
	want := []byte(time.Now().String())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: want}).FirstErr(); err != nil {
		return err
	}
	for {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return err
		}
		found := false
		fs.EachRecord(func(r *kgo.Record) { found = found || string(r.Value) == string(want) })
		if found {
			return nil
		}
	}
}
