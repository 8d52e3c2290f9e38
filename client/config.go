package client

import (
	"crypto/tls"
	"fmt"
	"maps"
	"strings"
	"time"

	"sluice/batch"
	"sluice/wire"
)

// Opt is an option of NewProducer, NewConsumer or NewAdmin. Options that do not concern
// the value being made are ignored by it.
type Opt interface{ apply(*cfg) }

type optFunc func(*cfg)

func (f optFunc) apply(c *cfg) { f(c) }

// cfg holds every option; defaultCfg sets the defaults and validate checks them.
type cfg struct {
	brokers      []string
	dialTimeout  time.Duration
	backoffMin   time.Duration
	backoffMax   time.Duration
	maxFrame     int
	linger       time.Duration
	batchBytes   int
	codec        batch.Codec
	maxBuffered  int64
	blockOnFull  bool
	maxInflight  int
	requestBytes int
	pollWait     time.Duration
	start        StartAt
	positions    map[int]int64 // StartPositions: a start offset by partition id
	tls          *tls.Config
	user         string // authenticate as user when set (Auth)
	password     string
	logicalLo    int
	logicalHi    int
	fetchBytes   int
	fetchWait    time.Duration
}

func defaultCfg() cfg {
	return cfg{
		dialTimeout:  5 * time.Second,
		backoffMin:   20 * time.Millisecond,
		backoffMax:   time.Second,
		maxFrame:     wire.DefaultMaxFrame,
		linger:       5 * time.Millisecond,
		batchBytes:   1 << 20,
		maxBuffered:  64 << 20,
		blockOnFull:  true,
		maxInflight:  8,
		requestBytes: 4 << 20,
		pollWait:     500 * time.Millisecond,
		start:        Oldest(),
		logicalLo:    0,
		logicalHi:    wire.LogicalPartitions - 1,
		fetchBytes:   1 << 20,
		fetchWait:    500 * time.Millisecond,
	}
}

func newCfg(opts []Opt) (cfg, error) {
	c := defaultCfg()
	for _, o := range opts {
		o.apply(&c)
	}
	return c, c.validate()
}

func (c *cfg) validate() error {
	var bad string
	switch {
	case len(c.brokers) == 0:
		return ErrNoBroker
	case c.dialTimeout <= 0 || c.backoffMin <= 0 || c.backoffMax < c.backoffMin:
		bad = "dial timeout and backoff must be positive, min <= max"
	case c.maxFrame < wire.DefaultMaxFrame:
		bad = fmt.Sprintf("max frame %d is below wire.DefaultMaxFrame", c.maxFrame)
	case c.linger < 0:
		bad = "linger is negative"
	case c.batchBytes < batch.HeaderSize+16 || c.batchBytes > batch.MaxSize:
		bad = fmt.Sprintf("batch bytes %d out of [72, %d]", c.batchBytes, batch.MaxSize)
	case c.codec > batch.CodecLZ4:
		bad = fmt.Sprintf("unknown codec %v", c.codec)
	case c.maxBuffered < int64(c.batchBytes):
		bad = fmt.Sprintf("max buffered bytes %d below batch bytes %d", c.maxBuffered, c.batchBytes)
	case c.maxInflight < 1 || c.requestBytes < c.batchBytes || c.requestBytes > batch.MaxSize:
		bad = fmt.Sprintf("max in flight (%d) must be positive and max request bytes (%d) in [batch bytes (%d), %d]",
			c.maxInflight, c.requestBytes, c.batchBytes, batch.MaxSize)
	case c.pollWait < time.Millisecond || c.fetchWait < 0 || c.fetchBytes < 1 || c.fetchBytes > batch.MaxSize:
		bad = fmt.Sprintf("poll wait must be at least 1ms, fetch wait not negative, fetch bytes in [1, %d]", batch.MaxSize)
	case c.user != "" && (c.password == "" || strings.ContainsAny(c.user, ",=")):
		bad = "authentication needs a password, and a user name without ',' or '='"
	case c.logicalLo < 0 || c.logicalHi >= wire.LogicalPartitions || c.logicalLo > c.logicalHi:
		bad = fmt.Sprintf("logical range [%d, %d] out of [0, 65535]", c.logicalLo, c.logicalHi)
	}
	if bad != "" {
		return fmt.Errorf("cannot configure client: %s", bad)
	}
	return nil
}

// Brokers sets the seed brokers ("host:port"), asked for metadata. Required.
func Brokers(addrs ...string) Opt {
	return optFunc(func(c *cfg) { c.brokers = append([]string(nil), addrs...) })
}

// TLS makes every connection use TLS with conf (its RootCAs, and Certificates for a
// broker that asks for a client certificate); nil: plaintext.
func TLS(conf *tls.Config) Opt { return optFunc(func(c *cfg) { c.tls = conf }) }

// DialTimeout bounds each connection attempt (default 5s); a consumer also waits at most
// twice as long, past its long poll, for a fetch answer (FetchMaxWait).
func DialTimeout(d time.Duration) Opt { return optFunc(func(c *cfg) { c.dialTimeout = d }) }

// RetryBackoff sets the first and the largest delay between reconnections and retries
// (default 20ms and 1s; each failure doubles the delay, with jitter).
func RetryBackoff(minDelay, maxDelay time.Duration) Opt {
	return optFunc(func(c *cfg) { c.backoffMin, c.backoffMax = minDelay, maxDelay })
}

// MaxFrame sets the largest response frame accepted (default and minimum
// wire.DefaultMaxFrame: a fetch answer holds at least one whole batch).
func MaxFrame(n int) Opt { return optFunc(func(c *cfg) { c.maxFrame = n }) }

// Linger is how long a producer batch waits for more records before it is sent
// (default 5ms), measured from the batch's first record, and shortened to what is left
// of a linger since the producer's last request before the batch began: a record
// produced when the producer sent nothing for a linger goes out at once, so a sparse
// stream pays no linger, while under load, where a batch begins as the last one leaves,
// batches gather as long as before. ProduceSync and Flush send at once. Lingers under a
// millisecond are kept to within tens of µs (the sender sleeps in nanosleep, not on a Go
// timer, which would fire a millisecond late); 0 is LowLatency.
func Linger(d time.Duration) Opt { return optFunc(func(c *cfg) { c.linger = d }) }

// LowLatency is the small-batch latency mode: Linger 0. A batch goes out as soon as the
// broker's sender is free, holding the records that arrived while it wrote the previous
// request, so batches stay small at low rates (a record is not held back for company)
// and grow by themselves under load (the sender is busy longer). It costs more requests
// per record at moderate rates than a linger of a few hundred µs.
func LowLatency() Opt { return Linger(0) }

// BatchBytes is the size at which a producer batch is sealed and sent (default 1 MiB). A
// record larger than this goes alone in a batch.
func BatchBytes(n int) Opt { return optFunc(func(c *cfg) { c.batchBytes = n }) }

// Compression sets the codec of the producer's batches (default batch.CodecNone). A batch
// that does not get smaller is sent uncompressed.
func Compression(codec batch.Codec) Opt { return optFunc(func(c *cfg) { c.codec = codec }) }

// MaxBufferedBytes bounds the memory a producer holds for records not yet persisted
// (default 64 MiB). See BlockOnFull.
//
// The producer keeps every record until the broker has written it to disk, so that it
// can send it again if the broker fails first; a broker accepts into memory at once, but
// while its disk stalls nothing becomes durable, and once the bound is reached Produce
// waits for the disk. Size it for the rate times the longest stall to ride out: 64 MiB is
// 0.25 s at 256 MB/s. (On the shared hosts of the benchmarks the disk stalled for over a
// second at a time: BENCHMARKS.md.) The bound counts batch bytes; the buffers that hold
// them stay within twice the bound: a batch keeps the buffer it was built in, which may
// be larger than it, until the held buffers reach twice the bound, and then each held
// batch is copied into a buffer of at most twice its bytes (or 256 bytes) if its own is
// larger.
func MaxBufferedBytes(n int64) Opt { return optFunc(func(c *cfg) { c.maxBuffered = n }) }

// BlockOnFull says what Produce does when the buffer is full: block until there is room
// or its context ends (true, the default), or fail at once with ErrBufferFull.
func BlockOnFull(block bool) Opt { return optFunc(func(c *cfg) { c.blockOnFull = block }) }

// MaxInflight bounds the produce requests in flight per partition (default 8).
func MaxInflight(n int) Opt { return optFunc(func(c *cfg) { c.maxInflight = n }) }

// MaxRequestBytes bounds the batches of one produce request (default 4 MiB); a request
// holds at least one batch.
func MaxRequestBytes(n int) Opt { return optFunc(func(c *cfg) { c.requestBytes = n }) }

// DurablePollWait is how long the broker may hold the empty produce a producer sends to
// learn the checkpoint when it is idle with unpersisted records (default 500ms).
func DurablePollWait(d time.Duration) Opt { return optFunc(func(c *cfg) { c.pollWait = d }) }

// Start sets where a consumer starts in every partition (default Oldest()).
func Start(s StartAt) Opt { return optFunc(func(c *cfg) { c.start = s }) }

// StartPositions makes a consumer start each partition named in pos (by physical
// partition id) at its offset, clamped to what the partition holds; the others start
// where Start says. An application that keeps the positions a consumer reached
// (Consumer.Positions) resumes from them this way, and one that chooses to lose the
// records of a batch that cannot be read starts its partition at the *BatchError's Next.
// NewConsumer fails if pos names a partition the consumer does not read.
func StartPositions(pos map[int]int64) Opt {
	return optFunc(func(c *cfg) { c.positions = maps.Clone(pos) })
}

// LogicalRange makes a consumer read only the records whose logical id is in [lo, hi],
// from the physical partitions serving that range (default: all of 0..65535).
func LogicalRange(lo, hi uint16) Opt {
	return optFunc(func(c *cfg) { c.logicalLo, c.logicalHi = int(lo), int(hi) })
}

// FetchMaxBytes bounds the records of one fetch answer (default 1 MiB, at most 64 MiB,
// batch.MaxSize; an answer holds at least one whole batch).
func FetchMaxBytes(n int) Opt { return optFunc(func(c *cfg) { c.fetchBytes = n }) }

// FetchMaxWait is the consumer's long poll: how long the broker may wait for records when
// there are none yet (default 500ms). A broker that has not answered a fetch within it
// plus twice the dial timeout is taken for hung: the consumer reads that broker's
// partitions again from where the metadata places them.
func FetchMaxWait(d time.Duration) Opt { return optFunc(func(c *cfg) { c.fetchWait = d }) }

// fetchTimeout is how long a consumer waits for a fetch answer before it takes the
// broker for hung and reads its partitions again from the metadata's brokers: the
// long poll's wait plus twice the dial timeout (a slow network is one that needs a
// longer dial timeout too).
func (c *cfg) fetchTimeout() time.Duration { return c.fetchWait + 2*c.dialTimeout }

// produceTimeout is how long a producer's connection may go without an answer while
// requests wait for one before the producer takes the broker for hung: it reconnects,
// asks the metadata where the partitions are now, and sends again what was not
// acknowledged. The durable long poll's wait plus twice the dial timeout.
func (c *cfg) produceTimeout() time.Duration { return c.pollWait + 2*c.dialTimeout }

// StartAt is where a consumer starts; make one with Oldest, Newest, AtOffset or AtTime.
type StartAt struct {
	kind   startKind
	offset int64
	millis int64
}

type startKind uint8

const (
	startOldest startKind = iota
	startNewest
	startOffset
	startTime
)

// Oldest starts at the first offset each partition still holds.
func Oldest() StartAt { return StartAt{kind: startOldest} }

// Newest starts after the last record of each partition: only new records are read.
func Newest() StartAt { return StartAt{kind: startNewest} }

// AtOffset starts at offset off in every partition (clamped to what the partition holds).
func AtOffset(off int64) StartAt { return StartAt{kind: startOffset, offset: off} }

// AtTime starts at the first record whose timestamp is at or after t, in one round trip:
// the broker's time index gives the first batch whose max timestamp is at or after t
// (list_offsets), and the consumer passes the records at its head stamped before t. It is
// exact when timestamps roughly follow offsets, which holds for producers that stamp
// records with their clock; every record after the first one returned is returned,
// whatever its timestamp.
func AtTime(t time.Time) StartAt { return StartAt{kind: startTime, millis: t.UnixMilli()} }
