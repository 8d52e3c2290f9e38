package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// Cluster is a broker's or an admin's connection to the cluster state in ZooKeeper
// (docs/cluster.md). go-zookeeper opens a new session by itself after an expiry, and a
// new session has none of the old one's ephemeral znodes: Cluster re-creates the ones
// registered through it on every new session.
type Cluster struct {
	conn *zk.Conn
	root string
	log  *slog.Logger

	mu struct {
		sync.Mutex
		ephemerals map[string][]byte // path -> content, re-created on a new session
		session    int64
		expired    []chan struct{} // closed on the next expiry
	}
	done chan struct{}
	// asked is the session timeout asked for; granted the one ZooKeeper granted (ms),
	// learned from go-zookeeper's log line, which is the only place it says it.
	asked      time.Duration
	granted    *atomic.Int32
	stats      leaderStats
	regs       lastGood[BrokerInfo] // the brokers' registrations, by id
	topicsRead lastGood[TopicInfo]  // the topics' znodes, by name
	digest     *Digest              // the session's ZooKeeper credential (WithDigest); nil: none
}

// BrokerInfo is a broker's registration; the broker refreshes its load figures in it
// every few seconds (UpdateRegistration).
type BrokerInfo struct {
	ID       string  `json:"-"`
	Addr     string  `json:"addr"`
	Capacity float64 `json:"capacity"`
	Load     float64 `json:"load"` // bytes/s produced to it, all partitions
	// Partitions are the figures of the partitions it serves, by "TOPIC/ID".
	Partitions map[string]PartLoad `json:"partitions,omitempty"`
	// Since is the zxid that created the registration (its session's, as read by
	// Brokers): a registration newer than an assignment means the broker lost its session
	// after that assignment was written, and gave up everything it held then.
	Since int64 `json:"-"`
	// Unreadable is set for a registration whose znode exists (the broker's session
	// lives) but holds junk (edited by hand), when this Cluster never read it good: only
	// ID and Since are known. One it read good before is returned as it last read it.
	Unreadable bool `json:"-"`
}

// PartLoad is one partition's figures as its broker reports them.
type PartLoad struct {
	BytesPerSec float64 `json:"bytes_per_sec"`    // produced, averaged over the last report interval
	HDFSLag     float64 `json:"hdfs_lag_seconds"` // age of the oldest data HDFS has not acknowledged
	// Epoch is the assignment epoch the broker serves the partition under; 0 when it
	// holds none (a placeholder, or a partition being given up). A leader that finds an
	// assignment unreadable and has no memory of it takes the holder from here.
	Epoch uint64 `json:"epoch,omitempty"`
}

// LoadKey is a partition's key in BrokerInfo.Partitions.
func LoadKey(pid PartitionID) string { return pid.Topic + "/" + strconv.Itoa(pid.ID) }

// parseID returns the partition id a znode name or a load key's last part spells, when
// it spells one exactly as this package writes ids (strconv.Itoa of an id ≥ 0): "01",
// "+1" and "-1" are names edited by hand, not aliases of partition 1 or a negative one.
func parseID(s string) (int, bool) {
	id, err := strconv.Atoi(s)
	if err != nil || id < 0 || strconv.Itoa(id) != s {
		return 0, false
	}
	return id, true
}

// Dial connects to ZooKeeper (addrs) with the given session timeout; the cluster state
// is under root. It returns once the session is established (and authenticated, with
// WithDigest) or ctx ends.
func Dial(ctx context.Context, addrs []string, root string, sessionTimeout time.Duration, log *slog.Logger, opts ...DialOption) (*Cluster, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Cluster{root: path.Clean("/" + root), log: log, done: make(chan struct{}),
		asked: sessionTimeout, granted: new(atomic.Int32)}
	conn, events, err := zk.Connect(addrs, sessionTimeout, zk.WithLogger(zkLogger{log, c.granted}),
		zk.WithDialer(handshakeDialer(c.SessionTimeout)))
	if err != nil {
		return nil, fmt.Errorf("cannot connect to ZooKeeper %v: %w", addrs, err)
	}
	c.conn = conn
	c.mu.ephemerals = map[string][]byte{}
	for _, o := range opts {
		o(c)
	}
	ready := make(chan struct{})
	go c.watchSession(events, ready)
	select {
	case <-ready:
	case <-ctx.Done():
		c.Close()
		return nil, fmt.Errorf("no ZooKeeper session with %v: %w", addrs, ctx.Err())
	}
	if err := c.addAuth(); err != nil {
		c.Close()
		return nil, err
	}
	for _, p := range []string{"brokers", "admin/election", "topics", "assignments", "released"} {
		// A connection lost now (a server slow to answer, a restart) is retried while
		// ctx lasts: go-zookeeper reconnects by itself.
		for {
			err := c.ensure(path.Join(c.root, p))
			if err == nil {
				break
			}
			if !errors.Is(err, zk.ErrConnectionClosed) || ctx.Err() != nil {
				c.Close()
				return nil, err
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return c, nil
}

// Close ends the session: its ephemeral znodes go at once.
func (c *Cluster) Close() {
	select {
	case <-c.done:
	default:
		close(c.done)
		c.conn.Close()
	}
}

// watchSession follows the session's events: on every new session it re-creates the
// registered ephemerals; on an expiry it wakes Expired's callers.
func (c *Cluster) watchSession(events <-chan zk.Event, ready chan struct{}) {
	first := true
	for ev := range events {
		switch ev.State {
		case zk.StateHasSession:
			c.mu.Lock()
			id := c.conn.SessionID()
			renewed := id != c.mu.session && !first
			c.mu.session = id
			eph := make(map[string][]byte, len(c.mu.ephemerals))
			for p, b := range c.mu.ephemerals {
				eph[p] = b
			}
			c.mu.Unlock()
			if first {
				first = false
				close(ready)
			}
			if renewed {
				c.log.Warn("new ZooKeeper session: registering again", "session", fmt.Sprintf("%x", id))
				for p, b := range eph {
					if err := c.createEphemeral(p, b); err != nil {
						c.log.Error("cannot register again after a new session", "znode", p, "err", err)
					}
				}
			}
		case zk.StateExpired:
			c.log.Warn("ZooKeeper session expired")
			c.mu.Lock()
			for _, ch := range c.mu.expired {
				close(ch)
			}
			c.mu.expired = nil
			c.mu.Unlock()
		}
	}
}

// Expired returns a channel closed at the session's next expiry (a broker stops taking
// writes then: its partitions may have moved).
func (c *Cluster) Expired() <-chan struct{} {
	ch := make(chan struct{})
	c.mu.Lock()
	c.mu.expired = append(c.mu.expired, ch)
	c.mu.Unlock()
	return ch
}

// ensure creates a persistent znode and its parents if missing.
func (c *Cluster) ensure(p string) error {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i := range parts {
		q := "/" + strings.Join(parts[:i+1], "/")
		if _, err := c.conn.Create(q, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("cannot create znode %s: %w", q, err)
		}
	}
	return nil
}

// createEphemeral creates the ephemeral znode p with content b. One this session made
// already is replaced; one of another session is not: its process may still run (a
// broker with the same id, or this one before a restart faster than the session
// timeout, hung but not dead), and taking its place would let both serve. It fails with
// errRegisteredElsewhere then.
func (c *Cluster) createEphemeral(p string, b []byte) error {
	_, err := c.conn.Create(p, b, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	if !errors.Is(err, zk.ErrNodeExists) {
		return err
	}
	_, st, err := c.conn.Get(p)
	switch {
	case errors.Is(err, zk.ErrNoNode): // gone meanwhile
		_, err = c.conn.Create(p, b, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		return err
	case err != nil:
		return err
	case st.EphemeralOwner != c.conn.SessionID():
		return fmt.Errorf("%w (session %x)", errRegisteredElsewhere, st.EphemeralOwner)
	}
	_, err = c.conn.Set(p, b, -1)
	return err
}

// errRegisteredElsewhere is why an ephemeral znode is not made: another live session
// holds it.
var errRegisteredElsewhere = errors.New("held by another ZooKeeper session")

// Register publishes the broker's registration (ephemeral: it lasts as long as the
// session, and is made again on every new one).
func (c *Cluster) Register(b BrokerInfo) error {
	p, data, err := c.keep(b)
	if err != nil {
		return err
	}
	for {
		err := c.createEphemeral(p, data)
		if !errors.Is(err, errRegisteredElsewhere) {
			if err != nil {
				return fmt.Errorf("cannot register broker %s: %w", b.ID, err)
			}
			return nil
		}
		// A process registered with this id still has its session: wait until
		// ZooKeeper ends it (at most its session timeout after it was last heard of).
		ok, _, gone, err := c.conn.ExistsW(p)
		if err != nil {
			return fmt.Errorf("cannot register broker %s: %w", b.ID, err)
		}
		if ok {
			c.log.Warn("broker id registered by another live session: waiting for it to end", "broker", b.ID)
			select {
			case <-gone:
			case <-c.done:
				return fmt.Errorf("cannot register broker %s: closed", b.ID)
			}
		}
	}
}

// UpdateRegistration replaces the broker's registration with b (same id): the new
// figures, kept for re-registering on a new session too.
func (c *Cluster) UpdateRegistration(b BrokerInfo) error {
	p, data, err := c.keep(b)
	if err != nil {
		return err
	}
	_, st, err := c.conn.Get(p)
	if err == nil && st.EphemeralOwner != c.conn.SessionID() {
		err = errRegisteredElsewhere // never overwrite another process's registration
	}
	if err == nil {
		_, err = c.conn.Set(p, data, st.Version)
	}
	if err != nil {
		return fmt.Errorf("cannot update the registration of broker %s: %w", b.ID, err)
	}
	return nil
}

// keep records b's registration for re-registering on a new session; it returns its
// znode and content.
func (c *Cluster) keep(b BrokerInfo) (string, []byte, error) {
	if !validBrokerID(b.ID) {
		return "", nil, fmt.Errorf("invalid broker id %q", b.ID)
	}
	data, err := json.Marshal(b)
	if err != nil {
		return "", nil, err
	}
	p := path.Join(c.root, "brokers", b.ID)
	c.mu.Lock()
	c.mu.ephemerals[p] = data
	c.mu.Unlock()
	return p, data, nil
}

// validBrokerID reports whether a broker may register under id: its registration's
// znode is named after it (ROOT/brokers/ID).
func validBrokerID(id string) bool { return id != "" && !strings.Contains(id, "/") }

// BrokersW returns the live brokers, sorted by id, and a channel that fires once when
// the set changes. A caller keeps the channel until it fires and reads in between
// with Brokers: each watch call adds a channel that the ZooKeeper client holds until
// its znode changes, so arming one per pass would pile them up in a quiet cluster.
func (c *Cluster) BrokersW() ([]BrokerInfo, <-chan zk.Event, error) {
	ids, _, ch, err := c.conn.ChildrenW(path.Join(c.root, "brokers"))
	if err != nil {
		return nil, nil, fmt.Errorf("cannot list brokers: %w", err)
	}
	out, err := c.readBrokers(ids)
	if err != nil {
		return nil, nil, err
	}
	return out, ch, nil
}

// Brokers returns the live brokers, sorted by id, without a watch. A registration whose
// content cannot be read (edited by hand) is still a live broker: it comes as this
// Cluster last read it, or marked Unreadable, and the junk is logged once.
func (c *Cluster) Brokers() ([]BrokerInfo, error) {
	ids, _, err := c.conn.Children(path.Join(c.root, "brokers"))
	if err != nil {
		return nil, fmt.Errorf("cannot list brokers: %w", err)
	}
	return c.readBrokers(ids)
}

// readBrokers reads the registrations of the brokers named.
func (c *Cluster) readBrokers(ids []string) ([]BrokerInfo, error) {
	dir := path.Join(c.root, "brokers")
	slices.Sort(ids)
	var out []BrokerInfo
	for _, id := range ids {
		data, st, err := c.conn.Get(path.Join(dir, id))
		if errors.Is(err, zk.ErrNoNode) {
			continue // gone since the listing
		}
		if err != nil {
			return nil, fmt.Errorf("cannot read broker %s: %w", id, err)
		}
		b, err := parseRegistration(id, data)
		if err != nil {
			b = c.junkRegistration(path.Join(dir, id), id, st.Mzxid, err)
		} else {
			c.regs.keep(id, b)
		}
		b.Since = st.Czxid
		out = append(out, b)
	}
	c.regs.prune(ids)
	return out, nil
}

// parseRegistration decodes a broker's registration.
func parseRegistration(id string, data []byte) (BrokerInfo, error) {
	b := BrokerInfo{ID: id}
	if err := json.Unmarshal(data, &b); err != nil {
		return b, err
	}
	if b.Addr == "" || b.Capacity < 0 {
		return b, fmt.Errorf("address %q, capacity %g", b.Addr, b.Capacity)
	}
	return b, nil
}

// junkRegistration is what readBrokers returns for broker id whose registration at znode
// holds junk: the broker lives (its session holds the ephemeral znode), so it is never
// left out. It stays as last read; one never read good is Unreadable (the leader keeps
// its partitions where they are and gives it none).
func (c *Cluster) junkRegistration(znode, id string, mzxid int64, err error) BrokerInfo {
	last, ok, fresh := c.regs.junk(id, mzxid)
	switch {
	case ok && fresh:
		c.log.Error("unreadable broker registration (edited by hand?): the broker stays live as last read",
			"znode", znode, "err", err)
	case fresh:
		c.log.Error("unreadable broker registration (edited by hand?), never read good: the broker stays live, "+
			"keeps its partitions and is given none", "znode", znode, "err", err)
	}
	if !ok {
		return BrokerInfo{ID: id, Unreadable: true}
	}
	return last
}

// Campaign enters the admin election as id and blocks until this admin leads (it
// returns nil) or ctx ends. Candidates are ephemeral sequential znodes named n_ and ten
// digits; the lowest leads, and each other watches only the one just before it. A child
// of the election that is no candidate (another name, or a persistent znode: made by
// hand) would block the election for good: it is ignored, and logged once.
func (c *Cluster) Campaign(ctx context.Context, id string) error {
	dir := path.Join(c.root, "admin", "election")
	data, _ := json.Marshal(map[string]string{"id": id})
	me, err := c.conn.Create(path.Join(dir, candidatePrefix), data, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		return fmt.Errorf("cannot enter the admin election: %w", err)
	}
	mine := path.Base(me)
	junk := map[string]bool{} // children that are no candidate, logged
	for {
		kids, _, err := c.conn.Children(dir)
		if err != nil {
			return fmt.Errorf("cannot read the admin election: %w", err)
		}
		kids = slices.DeleteFunc(kids, func(k string) bool {
			if isCandidate(k) && !junk[k] {
				return false
			}
			if !junk[k] {
				junk[k] = true
				c.log.Error("not a candidate of the admin election (made by hand?): ignored", "znode", path.Join(dir, k))
			}
			return true
		})
		slices.Sort(kids) // ten digits each: by sequence number
		i := slices.Index(kids, mine)
		switch {
		case i < 0:
			return errors.New("admin election: this candidate's znode is gone (session expired)")
		case i == 0:
			return nil
		}
		exists, st, ch, err := c.conn.ExistsW(path.Join(dir, kids[i-1]))
		if err != nil {
			return fmt.Errorf("cannot watch the admin before this one: %w", err)
		}
		if !exists {
			continue
		}
		if st.EphemeralOwner == 0 { // no admin's: theirs end with their session
			junk[kids[i-1]] = true
			c.log.Error("persistent znode in the admin election (made by hand?): ignored", "znode", path.Join(dir, kids[i-1]))
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			c.conn.Delete(me, -1)
			return ctx.Err()
		}
	}
}

// candidatePrefix is the name of an election candidate's znode before the sequence
// number ZooKeeper appends (ten digits).
const candidatePrefix = "n_"

// isCandidate reports whether name is an election candidate's: the prefix and ten digits.
func isCandidate(name string) bool {
	seq, ok := strings.CutPrefix(name, candidatePrefix)
	if !ok || len(seq) != 10 {
		return false
	}
	for _, r := range seq {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// zkLogger sends go-zookeeper's log lines to slog at debug level, and takes the session
// timeout the server granted from the line that reports it.
type zkLogger struct {
	log     *slog.Logger
	granted *atomic.Int32
}

// grantedLine is go-zookeeper's (v1.0.x) line for a new session; its second argument is
// the granted timeout in ms.
const grantedLine = "authenticated: id=%d, timeout=%d"

// Printf logs one of go-zookeeper's lines.
func (l zkLogger) Printf(format string, args ...any) {
	if format == grantedLine && len(args) == 2 {
		if ms, ok := args[1].(int32); ok {
			l.granted.Store(ms)
		}
	}
	l.log.Debug(fmt.Sprintf(format, args...), "from", "zookeeper")
}
