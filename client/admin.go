package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"sluice/wire"
)

// Admin makes the admin calls: create and describe topics, metadata. Its methods are safe
// from any goroutine; calls are serialized on one connection to a broker: a seed broker,
// or one a metadata answer named (learned), so that a client whose seeds have all died
// still finds the brokers that took their partitions over, as Kafka's clients do.
type Admin struct {
	cfg cfg
	// closing ends when Close begins: a call in its retry loop (backing off, dialing, or
	// waiting for an answer) stops then, so that Close never waits for a broker that is
	// down. Calls hold mu through their retries, which serializes them on one connection.
	closing context.Context
	stop    context.CancelFunc
	mu      struct {
		sync.Mutex
		rc      *rpcConn
		seed    int      // index of the broker to try next, in the seeds then learned
		learned []string // brokers metadata answers named that are not seeds
		closed  bool
	}
	// hung is what shun needs without mu, which a call holds while it waits for an
	// answer: the broker of the connection calls use, and the brokers found hung.
	hung struct {
		sync.Mutex
		addr string               // the broker of mu.rc, "" when none
		nc   net.Conn             // mu.rc's connection
		at   map[string]time.Time // broker: when a client last found it hung
	}
}

// shunFor is how long a broker a client found hung is left out of the Admin's rotation
// (unless every broker is): about as long as the broker's partitions take to move and
// the broker to be restarted or to wake.
const shunFor = 30 * time.Second

// maxLearned bounds the brokers an Admin learns from metadata (a cluster larger than
// that is still reached through the seeds and the first ones learned).
const maxLearned = 256

// learnLocked adds the brokers of ts that are neither seeds nor learned already.
func (a *Admin) learnLocked(ts []wire.Topic) {
	for _, t := range ts {
		for _, p := range t.Partitions {
			if p.Addr == "" || len(a.mu.learned) >= maxLearned || slices.Contains(a.cfg.brokers, p.Addr) ||
				slices.Contains(a.mu.learned, p.Addr) {
				continue
			}
			a.mu.learned = append(a.mu.learned, p.Addr)
		}
	}
}

// NewAdmin returns an Admin for the brokers given with the Brokers option. It connects on
// the first call.
func NewAdmin(opts ...Opt) (*Admin, error) {
	c, err := newCfg(opts)
	if err != nil {
		return nil, err
	}
	return newAdmin(c), nil
}

func newAdmin(c cfg) *Admin {
	a := &Admin{cfg: c}
	a.closing, a.stop = context.WithCancel(context.Background())
	return a
}

// Close closes the connection. Calls after Close return ErrClosed.
func (a *Admin) Close() error {
	a.stop()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.mu.closed = true
	if a.mu.rc != nil {
		a.mu.rc.close()
		a.mu.rc = nil
		a.using("", nil)
	}
	return nil
}

// CreateTopic creates a topic with the given number of physical partitions (1..65536)
// and options (zero values take the broker's defaults), and returns its metadata. For a
// topic that exists, the error matches wire.CodeTopicExists (see IsCode) and the
// existing topic's metadata is returned with it.
func (a *Admin) CreateTopic(ctx context.Context, name string, partitions int, o wire.TopicOptions) (wire.Topic, error) {
	req := &wire.CreateTopicRequest{Name: name, Partitions: uint32(partitions), Options: o}
	var t wire.Topic
	err := a.call(ctx, req, false, func(r *wire.Response) error {
		if body, ok := r.Body.(*wire.CreateTopicResponse); ok {
			t = body.Topic
		}
		return r.Err()
	})
	if err != nil {
		return t, fmt.Errorf("cannot create topic %s: %w", name, err)
	}
	return t, nil
}

// DescribeTopic returns a topic's metadata, options and the state of each partition.
func (a *Admin) DescribeTopic(ctx context.Context, name string) (*wire.DescribeTopicResponse, error) {
	var d *wire.DescribeTopicResponse
	err := a.call(ctx, &wire.DescribeTopicRequest{Name: name}, true, func(r *wire.Response) error {
		if err := r.Err(); err != nil {
			return err
		}
		d = r.Body.(*wire.DescribeTopicResponse)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot describe topic %s: %w", name, err)
	}
	return d, nil
}

// Metadata returns the metadata of the named topics that exist (of every topic when none
// is named), in the order asked.
func (a *Admin) Metadata(ctx context.Context, topics ...string) ([]wire.Topic, error) {
	var ts []wire.Topic
	err := a.call(ctx, &wire.MetadataRequest{Topics: topics}, true, func(r *wire.Response) error {
		if err := r.Err(); err != nil {
			return err
		}
		ts = r.Body.(*wire.MetadataResponse).Topics
		a.learnLocked(ts) // call holds a.mu
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot get metadata: %w", err)
	}
	return ts, nil
}

// topic returns the metadata of one topic; a missing topic is unknown_topic.
func (a *Admin) topic(ctx context.Context, name string) (wire.Topic, error) {
	ts, err := a.Metadata(ctx, name)
	if err != nil {
		return wire.Topic{}, err
	}
	if len(ts) != 1 || ts[0].Name != name {
		return wire.Topic{}, fmt.Errorf("cannot find topic %s: %w", name, wire.NewError(wire.CodeUnknownTopic, ""))
	}
	return ts[0], nil
}

// call sends req and hands the answer to use, retrying after connection failures (and
// after retriable codes when idempotent) with backoff until ctx ends. Each call decodes
// into a new response, so what use keeps stays valid.
func (a *Admin) call(ctx context.Context, req wire.Body, idempotent bool, use func(*wire.Response) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(a.closing, cancel)()
	a.mu.Lock()
	defer a.mu.Unlock()
	delay := a.cfg.backoffMin
	for {
		err := a.attemptLocked(ctx, req, idempotent, use)
		var pe *wire.ProtocolError
		retry := err != nil && !permanent(err) && (!errors.As(err, &pe) || (idempotent && pe.Code.Retriable()))
		if !retry || a.mu.closed {
			return err
		}
		if werr := sleepCtx(ctx, jitter(delay)); werr != nil {
			if a.closing.Err() != nil {
				werr = ErrClosed
			}
			return fmt.Errorf("%w (last error: %w)", werr, err)
		}
		delay = min(2*delay, a.cfg.backoffMax)
	}
}

// attemptLocked is one try of call. A read (idempotent) that the broker does not answer
// within twice the dial timeout ends, and the next try goes to the next broker: a hung
// broker (paused, or its host gone without a reset) must not hold up the clients that
// ask it for metadata (a consumer reads the layouts every few seconds) until their own
// context ends, which for a consumer's Poll may be never. A write is left to the
// caller's context: another try could apply it twice.
func (a *Admin) attemptLocked(ctx context.Context, req wire.Body, idempotent bool, use func(*wire.Response) error) error {
	if !idempotent {
		return a.tryLocked(ctx, req, use)
	}
	actx, cancel := context.WithTimeout(ctx, 2*a.cfg.dialTimeout)
	defer cancel()
	err := a.tryLocked(actx, req, use)
	if err != nil && ctx.Err() == nil && actx.Err() != nil {
		err = fmt.Errorf("no answer within %v: %w", 2*a.cfg.dialTimeout, os.ErrDeadlineExceeded)
	}
	return err
}

func (a *Admin) tryLocked(ctx context.Context, req wire.Body, use func(*wire.Response) error) error {
	if a.mu.closed {
		return ErrClosed
	}
	if a.mu.rc == nil {
		addr := a.nextLocked()
		rc, err := dialRPC(ctx, &a.cfg, addr)
		if err != nil {
			return err
		}
		a.mu.rc = rc
		a.using(addr, rc.nc)
	}
	a.mu.rc.resp = wire.Response{}
	resp, err := a.mu.rc.call(ctx, req)
	if err != nil {
		a.mu.rc.close()
		a.mu.rc = nil
		a.using("", nil)
		return err
	}
	return use(resp)
}

// nextLocked returns the broker to dial next, in turn through the seeds then the brokers
// learned, leaving out those a client found hung lately unless all of them are.
func (a *Admin) nextLocked() string {
	n := len(a.cfg.brokers) + len(a.mu.learned)
	at := func(i int) string {
		if i < len(a.cfg.brokers) {
			return a.cfg.brokers[i]
		}
		return a.mu.learned[i-len(a.cfg.brokers)]
	}
	start := a.mu.seed
	for i := range n {
		if addr := at((start + i) % n); !a.shunned(addr) {
			a.mu.seed = start + i + 1
			return addr
		}
	}
	a.mu.seed = start + 1
	return at(start % n)
}

// using records the broker and connection calls use from now on (none: "", nil).
func (a *Admin) using(addr string, nc net.Conn) {
	a.hung.Lock()
	defer a.hung.Unlock()
	a.hung.addr, a.hung.nc = addr, nc
}

// shunned reports whether a client found the broker at addr hung within shunFor.
func (a *Admin) shunned(addr string) bool {
	a.hung.Lock()
	defer a.hung.Unlock()
	t, ok := a.hung.at[addr]
	return ok && time.Since(t) < shunFor
}

// shun tells the Admin that the broker at addr did not answer a producer's or a
// consumer's request in time (hung: paused, or its host gone without a reset). Its
// metadata is what that client asks next, to learn where the broker's partitions went,
// and the Admin's connection may well be to the same broker: a call waiting on it now
// would wait out its own timeout (twice the dial timeout) before trying another broker,
// doubling the client's stall. So the connection is closed at once when it is to addr
// (the call in flight fails and is tried again at the next broker), and addr is left out
// of the rotation for shunFor. Any goroutine; it never waits for a call.
func (a *Admin) shun(addr string) {
	if nc := a.shunLocking(addr); nc != nil {
		// Outside the lock: a TLS connection's Close writes its close_notify first, which
		// can wait on a peer that reads nothing. tryLocked closes it again, harmlessly,
		// when the call fails.
		nc.Close()
	}
}

// shunLocking records addr as found hung now and returns the Admin's connection when it
// is to addr.
func (a *Admin) shunLocking(addr string) net.Conn {
	a.hung.Lock()
	defer a.hung.Unlock()
	if a.hung.at == nil {
		a.hung.at = map[string]time.Time{}
	}
	now := time.Now()
	for b, t := range a.hung.at { // bounded by the brokers known
		if now.Sub(t) >= shunFor {
			delete(a.hung.at, b)
		}
	}
	a.hung.at[addr] = now
	if a.hung.addr == addr {
		return a.hung.nc
	}
	return nil
}

// IsCode reports whether err carries a broker answer with code c.
func IsCode(err error, c wire.Code) bool {
	var pe *wire.ProtocolError
	return errors.As(err, &pe) && pe.Code == c
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// jitter returns a delay between d/2 and d.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}
