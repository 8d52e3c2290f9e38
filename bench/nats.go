package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The NATS driver publishes to a JetStream stream named after the topic, with subjects
// "TOPIC.P" for P in [0, partitions): producer j publishes to subject j mod partitions,
// consumer i of n reads the subjects i, i+n, ... with an ordered pull consumer (no acks).
// Publishes are asynchronous (PublishAsync, at most natsMaxPending unacknowledged, like
// `nats bench`); each publish's acknowledgment (the stream stored it) is its ack.
// Batching and linger are the connection's: nats.go coalesces writes in its buffered
// writer and flushes them from its flusher goroutine; BatchBytes and Linger do not apply.
// The stream's fsync policy is the server's (sync_interval), set where it is started.
func init() {
	register("nats", func(addr string) (Driver, error) {
		nc, err := nats.Connect("nats://"+addr, nats.Timeout(5*time.Second))
		if err != nil {
			return nil, err
		}
		return &natsDriver{addr: addr, nc: nc}, nil
	})
}

const natsMaxPending = 4000

// natsStallWait is how long a publish waits for room among the unacknowledged ones.
// nats.go gives up after 200 ms by default (ErrTooManyStalledMsgs): a pause of the shared
// machine then ended a run, where the sluice and Kafka producers just wait for room.
var natsStallWait = jetstream.WithStallWait(30 * time.Second)

type natsDriver struct {
	addr string
	nc   *nats.Conn // for Prepare
}

func (d *natsDriver) Close() error { d.nc.Close(); return nil }

func (d *natsDriver) Prepare(ctx context.Context, c *Config) error {
	js, err := jetstream.New(d.nc)
	if err != nil {
		return err
	}
	// Retention: the stream's MaxBytes covers every partition (subject); the oldest
	// messages go first (DiscardOld), whole blocks are deleted once emptied.
	maxBytes := int64(-1)
	if c.RetentionBytes > 0 {
		maxBytes = c.RetentionBytes * int64(c.Partitions)
	}
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: c.Topic, Subjects: []string{c.Topic + ".>"}, Storage: jetstream.FileStorage,
		Replicas: 1, Retention: jetstream.LimitsPolicy, MaxBytes: maxBytes, MaxMsgs: -1,
		Discard: jetstream.DiscardOld,
	})
	return err
}

// natsConn gives each producer and consumer its own connection, as sluice and Kafka
// clients have their own.
func (d *natsDriver) natsConn() (*nats.Conn, error) {
	return nats.Connect("nats://"+d.addr, nats.Timeout(5*time.Second), nats.FlusherTimeout(10*time.Second))
}

var natsProducers int // producer counter for subject choice; producers are made serially

func (d *natsDriver) NewProducer(ctx context.Context, c *Config) (Producer, error) {
	nc, err := d.natsConn()
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(natsMaxPending))
	if err != nil {
		nc.Close()
		return nil, err
	}
	p := &natsProducer{nc: nc, js: js, acks: make(chan natsPending, natsMaxPending*2), done: make(chan struct{})}
	p.subject = c.Topic + "." + strconv.Itoa(natsProducers%c.Partitions)
	natsProducers++
	go p.ackLoop()
	return p, nil
}

type natsPending struct {
	f   jetstream.PubAckFuture
	ack func(error)
}

type natsProducer struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	subject string
	acks    chan natsPending
	done    chan struct{}
}

// ackLoop waits for each future in publish order and calls its ack.
func (p *natsProducer) ackLoop() {
	defer close(p.done)
	for pa := range p.acks {
		select {
		case <-pa.f.Ok():
			pa.ack(nil)
		case err := <-pa.f.Err():
			pa.ack(err)
		}
	}
}

// Send publishes v. The payload is not copied: nats.go writes it into the connection's
// buffer at once and keeps the slice only to retry a publish that found no stream,
// which a benchmark does not see.
func (p *natsProducer) Send(ctx context.Context, v []byte, ack func(error)) error {
	f, err := p.js.PublishAsync(p.subject, v, natsStallWait)
	if err != nil {
		return err
	}
	if ack != nil {
		p.acks <- natsPending{f, ack}
	}
	return nil
}

func (p *natsProducer) Acks() bool { return true }

func (p *natsProducer) Flush(ctx context.Context) error {
	select {
	case <-p.js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%d publishes unacknowledged: %w", p.js.PublishAsyncPending(), ctx.Err())
	}
}

func (p *natsProducer) Close() error {
	close(p.acks)
	<-p.done
	p.nc.Close()
	return nil
}

func (d *natsDriver) NewConsumer(ctx context.Context, c *Config, i, n int) (Consumer, error) {
	nc, err := d.natsConn()
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy}
	if c.FromStart {
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	}
	if n > 1 {
		for p := i; p < c.Partitions; p += n {
			cfg.FilterSubjects = append(cfg.FilterSubjects, c.Topic+"."+strconv.Itoa(p))
		}
	}
	cs, err := js.OrderedConsumer(ctx, c.Topic, cfg)
	if err != nil {
		nc.Close()
		return nil, err
	}
	it, err := cs.Messages(jetstream.PullMaxMessages(1000))
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &natsConsumer{nc: nc, it: it}, nil
}

type natsConsumer struct {
	nc      *nats.Conn
	it      jetstream.MessagesContext
	arrived int64 // when the last Next returned (Arrivals)
}

// Arrived returns when the Next that brought the current record returned: messages come
// one at a time, so delivery is about 0 and transit includes the client's queue.
func (c *natsConsumer) Arrived() int64 { return c.arrived }

func (c *natsConsumer) Run(ctx context.Context, fn func([]byte) bool) error {
	stop := context.AfterFunc(ctx, c.it.Stop)
	defer stop()
	for {
		m, err := c.it.Next()
		c.arrived = time.Now().UnixNano()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return err
		}
		if !fn(m.Data()) {
			return nil
		}
	}
}

func (c *natsConsumer) Close() error {
	c.it.Stop()
	c.nc.Close()
	return nil
}
