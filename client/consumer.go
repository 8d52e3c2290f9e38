package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"sluice/batch"
	"sluice/wire"
)

// Consumer reads a topic: every physical partition, or those serving a logical range.
// Per broker, a fetcher goroutine keeps one fetch_multi request for all the partitions
// that broker serves in flight, and sends the next the moment an answer arrives
// (fetcher.go): the broker answers as soon as any of them has records (long poll of
// FetchMaxWait), so a quiet partition never holds up a busy one, and the application
// iterates one answer while the next is on the wire:
//
//	for {
//		if err := c.Poll(ctx); err != nil { ... }
//		for c.Next() { r := c.Record(); ... }
//		if err := c.Err(); err != nil { ... }
//	}
//
// Poll, Next, Record, Partition and Err are used by one goroutine at a time; Close may be
// called from any goroutine.
type Consumer struct {
	cfg    cfg
	topic  string
	topicB []byte
	admin  *Admin
	parts  []*cpart
	cur    *cpart
	curC   int64 // the checkpoint C of the answer being iterated
	unread bool  // Poll took an answer and Next has not returned false since
	ri     recordIter
	// The fetchers, owned by the goroutine calling Poll (mu.fetchers is the copy Close
	// reads): started by Poll; a failed lane is started again from its cursors while the
	// others go on (down, consumer_lanes.go), and a failure of all stops them all.
	fetchers []*fetcher
	// down are the partitions of failed lanes, each lane's waiting for its own backoff
	// to start again (after asking the metadata: revived brings the answer).
	down    downLanes
	revived chan laneMetadata
	asks    sync.WaitGroup // the metadata asks of reviveAsk, which Close waits for
	fwg     sync.WaitGroup
	ready   chan *answer // answers of every fetcher, in arrival order
	ans     *answer      // the answer Next iterates
	partIdx int          // its next part
	stop    chan struct{}
	once    sync.Once
	// failed is the error that stopped an iteration (damaged data: a *GapError or a
	// corrupt batch); Poll returns it from then on, so nothing past it is delivered.
	failed error
	// The topic's layouts and the gates between them (consumer_layout.go), owned by the
	// goroutine calling Poll: lvChecked is when the view was last looked at; stale says
	// a batch showed it is behind; regate that the partitions to fetch changed. byID
	// indexes parts by partition id.
	lv        layoutView
	lvChecked time.Time
	stale     bool
	regate    bool
	started   bool
	byID      []*cpart
	// addrChecked is when followAddresses last asked the metadata.
	addrChecked time.Time
	// earlyFetches counts the requests fetchers sent before the answer in front of them
	// was read whole (fetcher.readEarly); read by tests.
	earlyFetches atomic.Int64
	// oldFetch holds the brokers that refused a fetch_multi version, with the version
	// their fetchers ask for now, one below the refused one (owned by the goroutine
	// calling Poll).
	oldFetch map[string]uint16

	mu struct {
		sync.Mutex
		conns    map[string]*rpcConn // by broker address: start offsets, single fetches
		fetchers []*fetcher
	}
}

// cpart is a partition the consumer reads.
type cpart struct {
	id   int
	addr string // the broker serving it, as the last metadata said; empty while moving
	cur  cursor
	held bool // at its bound: not fetched until its gate opens (consumer_layout.go)
	// unrouted: left out of the running fetchers because the metadata named no broker
	// for it (startFetchers); followAddresses looks again.
	unrouted bool
	// timeStart: its start at the consumer's time is not known yet (it had no broker when
	// the consumer started); it is unrouted until followAddresses asked for it.
	timeStart bool
	// backoff is how long its lane waited after its last failure, 0 once a lane of it
	// delivered an answer since (consumer_lanes.go's laneBackoff).
	backoff time.Duration
}

// NewConsumer connects to the topic and finds the start offset of every partition it
// reads (see Start and LogicalRange).
func NewConsumer(ctx context.Context, topic string, opts ...Opt) (*Consumer, error) {
	c, err := newCfg(opts)
	if err != nil {
		return nil, err
	}
	cs := &Consumer{cfg: c, topic: topic, topicB: []byte(topic), admin: newAdmin(c),
		curC: -1, stop: make(chan struct{})}
	cs.mu.conns = map[string]*rpcConn{}
	cs.ri.lo, cs.ri.hi = uint16(c.logicalLo), uint16(c.logicalHi)
	cs.lv.lo, cs.lv.hi = c.logicalLo, c.logicalHi
	if err := cs.resolve(ctx); err != nil {
		cs.Close()
		return nil, fmt.Errorf("cannot start consumer: %w", err)
	}
	return cs, nil
}

// resolve picks the partitions serving the logical range and their start offsets.
func (c *Consumer) resolve(ctx context.Context) error {
	if err := c.loadLayouts(ctx); err != nil {
		return err
	}
	d, err := c.describe(ctx)
	if err != nil {
		return err
	}
	defer func() { c.indexParts(); c.started = true }()
	for _, ps := range d.Partitions {
		if !c.lv.reads(int(ps.ID)) {
			continue
		}
		p := &cpart{id: int(ps.ID), addr: ps.Addr}
		switch s := c.cfg.start; s.kind {
		case startOldest:
			p.cur.next = ps.LogStartOffset
		case startNewest:
			p.cur.next = ps.NextOffset
		case startOffset:
			p.cur.next = min(max(s.offset, ps.LogStartOffset), ps.NextOffset)
		}
		c.parts = append(c.parts, p)
	}
	if err := c.checkPositions(); err != nil {
		return err
	}
	switch c.cfg.start.kind {
	case startTime:
		err = c.retry(ctx, func(ctx context.Context) error { return c.startAtTime(ctx, c.cfg.start.millis) })
	case startNewest, startOffset: // a broker in a cluster describes only what it serves
		err = c.retry(ctx, c.startAtEnds)
	}
	if err == nil && len(c.cfg.positions) > 0 {
		err = c.retry(ctx, c.startAtPositions)
	}
	return err
}

// describe describes the topic once the description lists every partition of the
// layouts: a broker that has not read the last expansion yet (it reads the layouts from
// ZooKeeper, but describes the partitions it listed) is asked again, or a partition
// missing from the description would never be read (the layouts, being read already,
// would not bring it later). A description with more partitions (expanded between the
// two reads) has the layouts read again.
func (c *Consumer) describe(ctx context.Context) (*wire.DescribeTopicResponse, error) {
	for delay := c.cfg.backoffMin; ; delay = min(2*delay, c.cfg.backoffMax) {
		d, err := c.admin.DescribeTopic(ctx, c.topic)
		if err != nil {
			return nil, err
		}
		n := int(c.lv.last().Partitions)
		if n < len(d.Partitions) {
			if err := c.loadLayouts(ctx); err != nil {
				return nil, err
			}
			n = int(c.lv.last().Partitions)
		}
		if n <= len(d.Partitions) {
			return d, nil
		}
		if err := sleepCtx(ctx, jitter(delay)); err != nil {
			return nil, fmt.Errorf("cannot describe topic %s: its %d partitions (the layouts have %d): %w",
				c.topic, len(d.Partitions), n, err)
		}
	}
}

// Poll takes the next fetch answer (the records of one or more partitions from one
// broker), waiting for one; Next then iterates its records. The records are
// valid until the next Poll. A Poll before Next returned false keeps the answer: it
// returns at once, and Next goes on where it stopped, so no record is skipped.
// Connection failures and retriable codes are retried with backoff until ctx ends,
// refreshing the partitions' addresses before each retry.
func (c *Consumer) Poll(ctx context.Context) error {
	return c.retry(ctx, c.poll)
}

// retry runs op until it succeeds, fails for good or ctx ends. After a retriable failure
// it waits (backoff with jitter) and refreshes the topic's metadata: a connection failure
// or not_serving may mean that a partition moved, or that the address the consumer had
// was empty (a partition moving) or stale.
func (c *Consumer) retry(ctx context.Context, op func(context.Context) error) error {
	delay := c.cfg.backoffMin
	for {
		err := op(ctx)
		if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		if err == nil || ctx.Err() != nil || c.closed() || c.failed != nil || !retriable(err) {
			return err
		}
		if werr := sleepCtx(ctx, jitter(delay)); werr != nil {
			return fmt.Errorf("%w (last error: %w)", werr, err)
		}
		delay = min(2*delay, c.cfg.backoffMax)
		c.refresh(ctx)
	}
}

// retriable reports whether a fetch failure may go away: a connection failure (but not
// refused credentials or TLS settings) or a retriable code.
func retriable(err error) bool {
	if permanent(err) {
		return false
	}
	var pe *wire.ProtocolError
	return !errors.As(err, &pe) || pe.Code.Retriable() || staleRoute(pe.Code)
}

// refresh asks the topic's metadata again and takes the partitions' new addresses. It
// gives up after the dial timeout (the seed broker may be the one that is down); its
// failures are not reported: the next failure of a fetch refreshes again.
func (c *Consumer) refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.dialTimeout)
	defer cancel()
	t, err := c.admin.topic(ctx, c.topic)
	if err != nil {
		return
	}
	for _, p := range c.parts {
		if p.id < len(t.Partitions) {
			p.addr = t.Partitions[p.id].Addr
		}
	}
}

// followAddresses asks the metadata again, at most every heldRecheck, while a partition
// is left out of the fetchers for want of an address (a new partition not placed yet, one
// moving); once one has an address the fetchers start again with it (regate).
func (c *Consumer) followAddresses(ctx context.Context) {
	unrouted := false
	for _, p := range c.parts {
		unrouted = unrouted || p.unrouted
	}
	if !unrouted || time.Since(c.addrChecked) < heldRecheck {
		return
	}
	c.addrChecked = time.Now()
	c.refresh(ctx)
	for _, p := range c.parts {
		if p.unrouted && p.addr != "" && p.timeStart {
			c.startLate(ctx, p)
		}
		if p.unrouted && p.addr != "" && !p.timeStart {
			c.regate = true
		}
	}
}

func (c *Consumer) poll(ctx context.Context) error {
	if c.closed() {
		return ErrClosed
	}
	if c.failed != nil {
		return c.failed
	}
	if c.unread {
		// The fetchers asked for what follows this answer already: dropping its rest
		// would leave a hole the next answer could not continue (a gap error, a
		// consumer stopped for good).
		return nil
	}
	c.cur = nil
	c.ri.reset(nil, nil)
	if c.ans != nil { // the application is done with it: back to its fetcher
		c.ans.f.free <- c.ans
		c.ans = nil
	}
	c.followAddresses(ctx)
	if err := c.followLayouts(ctx); err != nil {
		return err
	}
	for !c.fetchable() { // every partition waits for another's older records
		if err := sleepCtx(ctx, heldRecheck); err != nil {
			return err
		}
		if err := c.followLayouts(ctx); err != nil {
			return err
		}
	}
	if c.fetchers == nil {
		if err := c.startFetchers(); err != nil {
			return err
		}
	}
	a, err := c.await(ctx)
	if err != nil {
		return err
	}
	if a.err != nil {
		c.stopFetchers()
		if c.closed() {
			return ErrClosed
		}
		var sf *singleFetchError
		if errors.As(a.err, &sf) {
			return c.fetchSingle(ctx, sf.p)
		}
		c.noteOldBroker(a.err) // retriable: the next try starts fetchers of an older version
		return a.err
	}
	c.ans, c.partIdx, c.unread = a, 0, true
	return nil
}

// fetchSingle reads partition p once with the single-partition fetch (data only HDFS
// holds, in distributed mode); the fetchers start again at the next Poll.
func (c *Consumer) fetchSingle(ctx context.Context, p *cpart) error {
	rc, err := c.conn(ctx, p.addr)
	if err == nil {
		var resp *wire.Response
		resp, err = rc.call(ctx, &wire.FetchRequest{Topic: c.topicB, Partition: uint32(p.id), Offset: p.cur.next,
			MaxBytes: uint32(c.cfg.fetchBytes)})
		if err == nil {
			return c.take(p, resp)
		}
	}
	c.dropConns()
	return fmt.Errorf("cannot fetch %s/%d: %w", c.topic, p.id, err)
}

// take applies a single-partition fetch answer of partition p.
func (c *Consumer) take(p *cpart, resp *wire.Response) error {
	body, _ := resp.Body.(*wire.FetchResponse)
	switch code := resp.Header.Code; {
	case code == wire.CodeNone:
		limit, stamp := c.bound(p)
		if limit <= p.cur.next {
			c.hold(p, false)
			return nil
		}
		c.cur, c.curC, c.unread = p, body.Checkpoint, true
		c.ri.topic, c.ri.part = c.topic, p.id
		c.ri.reset(body.Records, &p.cur)
		c.ri.limit, c.ri.stamp = limit, stamp
		return nil
	case code == wire.CodeOffsetOutOfRange && body != nil:
		// Retention removed what we wanted (skip to the oldest kept), or we are past the end.
		p.cur.next = min(max(p.cur.next, body.LogStartOffset), body.HighWatermark)
		return nil
	default:
		return fmt.Errorf("cannot fetch %s/%d at %d: %w", c.topic, p.id, p.cur.next, resp.Err())
	}
}

// conn returns the connection to addr, dialing it if needed.
func (c *Consumer) conn(ctx context.Context, addr string) (*rpcConn, error) {
	if addr == "" {
		return nil, errNoAddress
	}
	c.mu.Lock()
	rc := c.mu.conns[addr]
	c.mu.Unlock()
	if rc != nil {
		return rc, nil
	}
	rc, err := dialRPC(ctx, &c.cfg, addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed() {
		rc.close()
		return nil, ErrClosed
	}
	c.mu.conns[addr] = rc
	return rc, nil
}

// dropConns closes every connection: their streams are in an unknown state.
func (c *Consumer) dropConns() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for addr, rc := range c.mu.conns {
		rc.close()
		delete(c.mu.conns, addr)
	}
}

// Next moves to the next record of the current answer; false when there are no more, or
// on damaged data: see Err.
func (c *Consumer) Next() bool {
	for {
		if c.ri.next() {
			return true
		}
		if c.ri.err != nil {
			c.failed, c.unread = c.ri.err, false
			return false
		}
		if c.ri.held {
			c.hold(c.cur, c.ri.stale)
			c.ri.held = false
		}
		if c.ans == nil || c.partIdx >= len(c.ans.parts) {
			c.unread = false
			return false
		}
		ap := &c.ans.parts[c.partIdx]
		c.partIdx++
		if ap.p.held {
			continue // held since the answer was fetched: read again once its gate opens
		}
		if ap.skipTo >= 0 {
			ap.p.cur.next = ap.skipTo
		}
		limit, stamp := c.bound(ap.p)
		if limit <= ap.p.cur.next {
			c.hold(ap.p, false)
			continue
		}
		c.cur, c.curC = ap.p, ap.checkpoint
		c.ri.topic, c.ri.part = c.topic, ap.p.id
		c.ri.reset(ap.records, &ap.p.cur)
		c.ri.verified = ap.verified
		c.ri.limit, c.ri.stamp = limit, stamp
	}
}

// Record returns the current record. It points into the consumer and is overwritten by
// Next; its slices are valid until the next Poll.
func (c *Consumer) Record() *batch.Record { return c.ri.rec }

// Partition returns the physical partition of the current record, -1 before the first.
func (c *Consumer) Partition() int {
	if c.cur == nil {
		return -1
	}
	return c.cur.id
}

// Checkpoint returns the checkpoint C (-1 when none) that the broker reported with the
// current answer: records at or below it are durable and never rewritten, while records
// above it (the broker serves up to its high watermark) may be lost and their offsets
// reused after a crash.
func (c *Consumer) Checkpoint() int64 { return c.curC }

// Err returns the error that ended Next early, if any: a batch that cannot be read
// (*BatchError: damaged data, or records that do not decode) or offsets that are not
// dense (*GapError, matching ErrOffsetGap). The records before it were delivered; the
// consumer stops there, and every later Poll returns the error.
func (c *Consumer) Err() error { return c.ri.err }

// Position returns the next offset the consumer will read in physical partition id.
func (c *Consumer) Position(id int) (int64, bool) {
	for _, p := range c.parts {
		if p.id == id {
			return p.cur.next, true
		}
	}
	return 0, false
}

// Positions returns the next offset the consumer will read in every physical partition
// it reads, by partition id: what StartPositions takes to resume there. Like Position,
// it is called from the goroutine calling Poll.
func (c *Consumer) Positions() map[int]int64 {
	pos := make(map[int]int64, len(c.parts))
	for _, p := range c.parts {
		pos[p.id] = p.cur.next
	}
	return pos
}

func (c *Consumer) closed() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// Close closes the consumer's connections; a Poll in progress returns ErrClosed.
func (c *Consumer) Close() error {
	c.once.Do(func() {
		c.mu.Lock()
		close(c.stop)
		for _, rc := range c.mu.conns {
			rc.close()
		}
		c.stopFetchersLocked()
		c.mu.Unlock()
		c.fwg.Wait()
		c.admin.Close() // ends the asks in flight
		c.asks.Wait()
	})
	return nil
}
