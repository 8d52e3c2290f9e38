package client

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"sluice/wire"
)

// Ack is the level a synchronous produce waits for.
type Ack uint8

const (
	// AckAccepted: the broker appended the record (to memory; not durable yet).
	AckAccepted Ack = iota
	// AckPersisted: the partition's checkpoint C covers the record.
	AckPersisted
)

// Result is where a synchronously produced record went.
type Result struct {
	Partition int
	// Offset is the record's offset, or -1 when the answers did not tell it exactly: its
	// batch was sent again (a connection lost, a refusal, a broker restarted), and a
	// resend's answer may count it with batches the broker no longer remembers.
	Offset int64
}

// Producer sends records to one topic. It is safe from any goroutine. See the package
// comment for the write window, and Close, which must be called.
type Producer struct {
	cfg    cfg
	topic  string
	topicB []byte
	admin  *Admin
	pid    int64
	t0     time.Time // monotonic origin of the windows' clock
	stages *producerStages
	// ctx ends when the producer stops; it cancels dials, waits and metadata refreshes.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// startLink, when set (tests of the windows' logic), starts a new link instead of
	// its sender goroutine.
	startLink func(*link)

	mu struct {
		sync.Mutex
		sh    winShared
		wins  []*window
		links []*link // per partition
		// every holds each link running: Close shuts them all down, or their
		// connections' readers would keep Close waiting. A link no partition uses any
		// more leaves it when retired (retireIdleLocked).
		every     []*link
		rt        router
		clock     recordClock   // each record's timestamp and window time
		changed   chan struct{} // closed when windows change and someone waits
		waiters   int
		err       error // sticky: the producer failed
		closed    bool
		maxProg   int64
		refreshes bool // a metadata refresh is running
		// version is the topic version the windows route by; next is the topic after an
		// expansion the producer follows (producer_expand.go), nil when none; layoutGen
		// counts the expansions followed (Flush takes its targets again after one).
		version   uint32
		next      *wire.Topic
		layoutGen uint64
	}
}

// NewProducer connects to the topic: it gets the topic's metadata (the topic must exist)
// and starts a sender per broker.
func NewProducer(ctx context.Context, topic string, opts ...Opt) (*Producer, error) {
	c, err := newCfg(opts)
	if err != nil {
		return nil, err
	}
	admin := newAdmin(c)
	t, err := admin.topic(ctx, topic)
	if err != nil {
		admin.Close()
		return nil, fmt.Errorf("cannot start producer: %w", err)
	}
	p := &Producer{cfg: c, topic: topic, topicB: []byte(topic), admin: admin, pid: newPID(), t0: time.Now(),
		stages: newProducerStages()}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.mu.clock = newRecordClock(p.t0)
	p.mu.sh = winShared{codec: c.codec, batchBytes: c.batchBytes, requestBytes: c.requestBytes,
		maxInflight: c.maxInflight, linger: int64(c.linger), freeBytes: c.maxBuffered / 4, newPID: newPID,
		pinLimit: 2 * c.maxBuffered, compactAt: 2 * c.maxBuffered,
		lastSend: -int64(c.linger), // idle for a linger at its start: the first record goes at once
		clock:    &p.mu.clock}
	p.mu.sh.compactAll = func() { // under p.mu, as every seal is
		for _, w := range p.mu.wins {
			w.compact()
		}
	}
	p.mu.changed = make(chan struct{})
	p.mu.rt = router{p: len(t.Partitions)}
	p.mu.version = t.Version
	p.mu.Lock()
	for i, part := range t.Partitions {
		p.mu.wins = append(p.mu.wins, newWindow(&p.mu.sh, i, t.Version, p.pid))
		p.mu.links = append(p.mu.links, p.linkLocked(part.Addr))
	}
	p.mu.Unlock()
	return p, nil
}

// newPID returns a random positive producer id. Ids are never chosen by the application:
// a producer starts its sequences at 0, and a partition remembers the last batches of
// each id (engine/dedup.go), so a new producer under a reused id would have its first
// batches taken for resends of the old one's and acknowledged without being appended.
// Nothing carries a producer's sequences across a restart, so there is no option to set
// the id. n producers' random ids collide with odds of about n²/2^64.
func newPID() int64 { return 1 + rand.Int64N(1<<63-1) }

// ID returns the producer id stamped on every batch (a partition that produced 2^31
// records switches to a new id rather than wrap its sequences).
func (p *Producer) ID() int64 { return p.pid }

// Partitions returns the topic's number of physical partitions.
func (p *Producer) Partitions() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.wins)
}

// now returns the windows' clock: nanoseconds since the producer started.
func (p *Producer) now() int64 { return int64(time.Since(p.t0)) }

// Produce adds a record to its partition's batch and returns: the record's bytes are
// copied, so r may be reused at once. The broker gets it within Linger, or when the batch
// is full. When the producer holds MaxBufferedBytes, Produce blocks until there is room
// or ctx ends (or fails with ErrBufferFull, per BlockOnFull).
func (p *Producer) Produce(ctx context.Context, r *Record) error {
	_, _, err := p.produce(ctx, r, false)
	return err
}

// ProduceSync produces a record, sends its batch at once, and waits until the broker
// accepted it, or until it is persisted, per level.
func (p *Producer) ProduceSync(ctx context.Context, r *Record, level Ack) (Result, error) {
	w, b, err := p.produce(ctx, r, true)
	if err != nil {
		return Result{Partition: -1, Offset: -1}, err
	}
	idx := int64(b.count - 1)
	res := Result{Partition: w.part, Offset: -1}
	err = p.waitFor(ctx, []*window{w}, func() (bool, error) {
		if b.moved != nil { // re-routed by an expansion: its record is elsewhere now
			w, b = movedTo(w, b)
			idx, res.Partition = int64(b.count-1), w.part
		}
		switch {
		case w.err != nil && !b.durable:
			return true, fmt.Errorf("cannot produce record: %w", w.err)
		case b.durable || (level == AckAccepted && b.accepted):
			if b.exact && b.base >= 0 {
				res.Offset = b.base + idx
			}
			return true, nil
		}
		return false, nil
	})
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("cannot produce record: %w", err)
	}
	return res, err
}

// produce routes and adds r; with seal, it also seals the batch and returns it (the
// record is its last).
func (p *Producer) produce(ctx context.Context, r *Record, seal bool) (*window, *pbatch, error) {
	size, err := sizeOf(r, p.cfg.maxBuffered)
	if err != nil {
		return nil, nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.roomLocked(ctx, size); err != nil {
		return nil, nil, err
	}
	// The clock only when the record needs it: for its timestamp if it brings none, else
	// (in add) to time a batch it opens. An application that stamps its records then
	// reads the clock once per batch, not once per record.
	ts, now := r.Timestamp, int64(-1)
	if ts == 0 {
		wallMs, mono := p.mu.clock.now()
		ts, now = wallMs, int64(mono)
	}
	w, wake := p.addLocked(r, ts, now)
	var b *pbatch
	if seal {
		w.seal()
		b, wake = w.q[len(w.q)-1], true
		b.sync = true
	}
	if wake {
		p.mu.links[w.part].wake()
	}
	return w, b, nil
}

// sizeOf returns the bytes r takes in the producer's buffer, or why it cannot take them.
func sizeOf(r *Record, maxBuffered int64) (int64, error) {
	size := recordSize(r)
	if size > MaxRecordBytes || size+recordOverhead > maxBuffered {
		return 0, fmt.Errorf("cannot produce record of %d bytes: %w", size, ErrRecordTooLarge)
	}
	return size + recordOverhead, nil
}

// addLocked routes r and adds it to its window with timestamp ts (now is the windows'
// clock, or -1 when not read); it reports whether the window's link must be woken (a
// batch opened or sealed).
func (p *Producer) addLocked(r *Record, ts, now int64) (*window, bool) {
	if keyless(r) {
		p.mu.rt.follow(p.nextOrdLocked)
	}
	logical, part := p.mu.rt.route(r)
	w := p.mu.wins[part]
	wake := w.add(r, logical, ts, now)
	p.mu.maxProg = max(p.mu.maxProg, r.Progress)
	return w, wake
}

// nextOrdLocked returns the ord partition part's next sealed batch will get.
func (p *Producer) nextOrdLocked(part int) uint64 { return p.mu.wins[part].nextOrd }

// roomLocked waits until the producer may buffer size more bytes.
func (p *Producer) roomLocked(ctx context.Context, size int64) error {
	for {
		switch {
		case p.mu.closed:
			return ErrClosed
		case p.mu.err != nil:
			return fmt.Errorf("cannot produce record: %w", p.mu.err)
		case p.mu.next != nil:
			// An expansion: records wait until every window drained and the old
			// layout's leftovers are routed again (producer_expand.go).
		case p.fitsLocked(size): // the cases above having failed, it is the room
			return nil
		case !p.cfg.blockOnFull:
			return ErrBufferFull
		default:
			// Full. Room comes from the batches sent, as the broker takes them; the open
			// ones free nothing until they are sealed and sent. When all the sent ones
			// going would still not make room, the open batches go now, whatever their
			// linger (with a long linger they would hold the buffer until it ended).
			// Not sooner: a saturated producer whose buffer waits for the disk would
			// seal every batch at its first records, and send smaller and smaller ones.
			if open := p.openBytesLocked(); open > 0 && open+size > p.cfg.maxBuffered {
				for i, w := range p.mu.wins {
					if w.seal() {
						p.mu.links[i].wake()
					}
				}
				continue // a compressed batch takes less room sealed
			}
		}
		if err := p.waitLocked(ctx); err != nil {
			return fmt.Errorf("cannot produce record: %w", p.gaveUpLocked(err, p.mu.wins))
		}
	}
}

// openBytesLocked returns the bytes of the open batches, counted in buffered.
func (p *Producer) openBytesLocked() int64 {
	var n int64
	for _, w := range p.mu.wins {
		if w.open {
			n += int64(w.bld.Len())
		}
	}
	return n
}

// Flush sends every record produced so far at once (ignoring Linger) and waits until the
// broker accepted them all.
func (p *Producer) Flush(ctx context.Context) error {
	return p.flush(ctx, AckAccepted)
}

// WaitPersisted sends every record produced so far at once and waits until checkpoints
// cover them all.
func (p *Producer) WaitPersisted(ctx context.Context) error {
	return p.flush(ctx, AckPersisted)
}

func (p *Producer) flush(ctx context.Context, level Ack) error {
	p.mu.Lock()
	var targets []uint64
	var gen uint64
	aim := func() { // requires p.mu
		targets, gen = make([]uint64, len(p.mu.wins)), p.mu.layoutGen
		for i, w := range p.mu.wins {
			if p.mu.next == nil && w.seal() { // (while draining, the windows seal their own)
				p.mu.links[i].wake()
			}
			targets[i] = w.lastOrd()
		}
	}
	aim()
	wins := p.mu.wins
	p.mu.Unlock()
	err := p.waitFor(ctx, wins, func() (bool, error) {
		if gen != p.mu.layoutGen || p.mu.next != nil {
			if p.mu.next != nil {
				return false, nil // the records may move: wait for the expansion to end
			}
			aim() // re-routed records are in the windows now, before any later one
		}
		for i, w := range p.mu.wins {
			reached := w.durableOrd >= targets[i] || (level == AckAccepted && w.acceptedOrd >= targets[i])
			switch {
			case w.err != nil && !reached:
				return true, fmt.Errorf("cannot flush producer: %w", w.err)
			case !reached:
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("cannot flush producer: %w", err)
	}
	return err
}

// waitFor blocks until cond, called with the lock held, says done, or ctx ends; then the
// error says why the windows wins made no progress, if a broker kept refusing them.
func (p *Producer) waitFor(ctx context.Context, wins []*window, cond func() (bool, error)) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if done, err := cond(); done {
			return err
		}
		if err := p.waitLocked(ctx); err != nil {
			return p.gaveUpLocked(err, wins)
		}
	}
}

// gaveUpLocked returns err, the reason a caller stopped waiting (its context's error),
// with the cause of the wait when the broker kept refusing some of wins with a retriable
// code since their last success: ErrBrokerNoSpace for a full disk, else the code.
func (p *Producer) gaveUpLocked(err error, wins []*window) error {
	for _, w := range wins {
		switch {
		case w.refused == wire.CodeNoSpace:
			return &refusedError{part: w.part, cause: ErrBrokerNoSpace, ctxErr: err}
		case w.refused != wire.CodeNone:
			return &refusedError{part: w.part, cause: wire.NewError(w.refused, ""), ctxErr: err}
		}
	}
	return err
}

// backoff returns the delay before retrying a request after n refusals in a row: it
// doubles from the minimum up to the maximum, with jitter.
func (p *Producer) backoff(n int) time.Duration {
	d := p.cfg.backoffMin
	for ; n > 0 && d < p.cfg.backoffMax; n-- {
		d *= 2
	}
	return jitter(min(d, p.cfg.backoffMax))
}

// waitLocked releases the lock until the windows change or ctx ends.
func (p *Producer) waitLocked(ctx context.Context) error {
	ch := p.mu.changed
	p.mu.waiters++
	p.mu.Unlock()
	var err error
	select {
	case <-ch:
	case <-ctx.Done():
		err = ctx.Err()
	case <-p.ctx.Done():
		err = ErrClosed
	}
	p.mu.Lock()
	p.mu.waiters--
	return err
}

// notifyLocked wakes the goroutines waiting for the windows to change.
func (p *Producer) notifyLocked() {
	if p.mu.waiters > 0 {
		close(p.mu.changed)
		p.mu.changed = make(chan struct{})
	}
}

// failLinkLocked gives up on every window that link l serves, with err, and fails the
// producer. A window's waiters (ProduceSync, Flush, WaitPersisted, Close) look at its
// own error: with only the producer's set, they would wait for a link that stopped
// reconnecting until their contexts ended.
//
// A link refused after it was retired serves no window and fails nothing. The link leaves
// every, so that a partition that moves to its broker later gets a new link (this one's
// sender has stopped), and an expansion whose last draining windows these were ends.
func (p *Producer) failLinkLocked(l *link, err error) {
	served := false
	for i, w := range p.mu.wins {
		if p.mu.links[i] == l {
			served = true
			if w.err == nil {
				w.fail(err)
			}
		}
	}
	l.stop()
	p.mu.every = slices.DeleteFunc(slices.Clone(p.mu.every), func(x *link) bool { return x == l })
	if served {
		p.failLocked(err)
		p.finishExpansionLocked()
	}
}

// failLocked makes the producer's failure sticky and wakes every waiter.
func (p *Producer) failLocked(err error) {
	if p.mu.err == nil {
		p.mu.err = err
	}
	p.notifyLocked()
}
