package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"sluice/wire"
)

// TopicInfo is a topic's znode (ROOT/topics/NAME).
type TopicInfo struct {
	Partitions int               `json:"partitions"`
	Version    uint32            `json:"version"`
	Options    wire.TopicOptions `json:"options"`
	// History is every layout the topic had, oldest first, the current one last; empty
	// for a topic never expanded (see Layouts).
	History []Layout `json:"history,omitempty"`
}

// Owner is a partition's assignment znode (ROOT/assignments/TOPIC/PARTITION): the broker
// that serves it and the epoch of that placement, raised on every move (the broker
// loading it takes a new session S above it).
type Owner struct {
	Broker string `json:"broker"`
	Epoch  uint64 `json:"epoch"`
	// From is the broker the partition moves from while that broker lives: Broker loads
	// it only once From released it (ROOT/released), so that it is never served by two
	// brokers at once. Empty when the previous broker was dead (its session expired: it
	// stopped writing before that) or there was none.
	From string `json:"from,omitempty"`
}

// parseOwner decodes and checks a partition's assignment znode. It refuses what the
// leader never writes, so that a znode edited by hand into one of these is taken for
// what it is, an assignment that cannot be read (Owner, Owners: one with no broker,
// which the leader repairs as last read and a broker leaves as it serves it):
//   - a broker id no broker can register under (empty, or with a '/': Register refuses
//     them; the leader names only registered brokers). An empty one was already taken
//     for unreadable by every reader, but with the rest of the junk: {"epoch": 9} gave
//     epoch 9 where a znode that is not JSON gives 0.
//   - a from of that kind (an absent one is fine: there is no broker to wait for).
//   - epoch 0 (validEpoch), which the leader never writes. It means no placement (a
//     load report's epoch 0 is "holds none"), and a broker that a partition at epoch 0
//     moves from never releases it unless it held it: a broker releases only above
//     what it released, which starts at 0.
func parseOwner(data []byte) (Owner, error) {
	var o Owner
	if err := json.Unmarshal(data, &o); err != nil {
		return Owner{}, fmt.Errorf("unreadable assignment znode: %w", err)
	}
	if !validBrokerID(o.Broker) || o.From != "" && !validBrokerID(o.From) || !validEpoch(o.Epoch) {
		return Owner{}, fmt.Errorf("unreadable assignment znode: broker %q, epoch %d, from %q", o.Broker, o.Epoch, o.From)
	}
	return o, nil
}

// validEpoch reports whether e is an assignment epoch the leader may write: its first
// placement of a partition is epoch 1 and each move adds one. (A move from the largest
// uint64 would wrap to 0, which readers then refuse: only a hand edit gets that far.)
func validEpoch(e uint64) bool { return e > 0 }

// ErrTopicExists is CreateTopic's error for a topic that exists.
var ErrTopicExists = errors.New("topic exists")

// Event is what a watch channel of this package delivers (go-zookeeper's event): a
// caller only waits on it, then reads again.
type Event = zk.Event

// CreateTopic writes a topic's znode; it fails with ErrTopicExists (and
// zk.ErrNodeExists) if the topic exists.
func (c *Cluster) CreateTopic(name string, info TopicInfo) error {
	if name == "" || path.Base(name) != name || info.Partitions < 1 {
		return fmt.Errorf("invalid topic %q with %d partitions", name, info.Partitions)
	}
	data, _ := json.Marshal(info)
	_, err := c.conn.Create(path.Join(c.root, "topics", name), data, 0, zk.WorldACL(zk.PermAll))
	if errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("cannot create topic %s: %w (%w)", name, ErrTopicExists, err)
	}
	if err != nil {
		return fmt.Errorf("cannot create topic %s: %w", name, err)
	}
	return nil
}

// TopicsW returns every topic's metadata and a channel that fires once when topics are
// added or removed (keep it until it fires: BrokersW says why). A topic znode whose
// content cannot be read (edited by hand) comes as this Cluster last read it, or is
// left out when it never read it good; the junk is logged once.
func (c *Cluster) TopicsW() (map[string]TopicInfo, <-chan zk.Event, error) {
	names, _, ch, err := c.conn.ChildrenW(path.Join(c.root, "topics"))
	if err != nil {
		return nil, nil, fmt.Errorf("cannot list topics: %w", err)
	}
	out, err := c.readTopics(names)
	if err != nil {
		return nil, nil, err
	}
	return out, ch, nil
}

// readTopics reads the znodes of the topics named.
func (c *Cluster) readTopics(names []string) (map[string]TopicInfo, error) {
	dir := path.Join(c.root, "topics")
	out := map[string]TopicInfo{}
	for _, n := range names {
		data, st, err := c.conn.Get(path.Join(dir, n))
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cannot read topic %s: %w", n, err)
		}
		ti, err := parseTopic(data)
		if err != nil {
			if last, ok := c.junkTopic(path.Join(dir, n), n, st.Mzxid, err); ok {
				out[n] = last
			}
			continue
		}
		c.topicsRead.keep(n, ti)
		out[n] = ti
	}
	c.topicsRead.prune(names)
	return out, nil
}

// junkTopic returns what readTopics takes for topic name whose znode holds junk: the
// topic as last read (its partitions are still placed: a dead broker's move on), or
// false when it never read it good (the topic is left out: its assignments stay as
// they are, nothing is deleted).
func (c *Cluster) junkTopic(znode, name string, mzxid int64, err error) (TopicInfo, bool) {
	last, ok, fresh := c.topicsRead.junk(name, mzxid)
	switch {
	case ok && fresh:
		c.log.Error("unreadable topic znode (edited by hand?): the topic is taken as last read", "znode", znode, "err", err)
	case fresh:
		c.log.Error("unreadable topic znode (edited by hand?), never read good: left out, its assignments stay as they are",
			"znode", znode, "err", err)
	}
	return last, ok
}

// Owned is an assignment as read, with its znode's version (for the leader's
// conditional write).
type Owned struct {
	Owner
	Version int32
	Zxid    int64 // the zxid that last wrote the assignment
}

// Owner reads one partition's assignment from ZooKeeper (a zero Owned when it has none;
// one with only the znode's version and zxid when parseOwner refuses it).
func (c *Cluster) Owner(pid PartitionID) (Owned, error) {
	data, st, err := c.conn.Get(path.Join(c.root, "assignments", pid.Topic, strconv.Itoa(pid.ID)))
	if errors.Is(err, zk.ErrNoNode) {
		return Owned{}, nil
	}
	if err != nil {
		return Owned{}, fmt.Errorf("cannot read the assignment of %s/%d: %w", pid.Topic, pid.ID, err)
	}
	o, err := parseOwner(data)
	if err != nil {
		return Owned{Version: st.Version, Zxid: st.Mzxid}, nil
	}
	return Owned{Owner: o, Version: st.Version, Zxid: st.Mzxid}, nil
}

// Owners returns every partition's assignment (one whose znode parseOwner refuses comes
// with no broker, only the znode's version and zxid: the leader repairs it, a broker
// goes on serving what it serves).
func (c *Cluster) Owners() (map[PartitionID]Owned, error) {
	out := map[PartitionID]Owned{}
	dir := path.Join(c.root, "assignments")
	topics, _, err := c.conn.Children(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot list assignments: %w", err)
	}
	for _, topic := range topics {
		ids, _, err := c.conn.Children(path.Join(dir, topic))
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return nil, fmt.Errorf("cannot list assignments of %s: %w", topic, err)
		}
		for _, id := range ids {
			n, ok := parseID(id)
			if !ok { // "-1", "01": edited by hand
				c.log.Error("assignment znode not named after a partition: left out", "topic", topic, "znode", id)
				continue
			}
			data, st, err := c.conn.Get(path.Join(dir, topic, id))
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("cannot read the assignment of %s/%s: %w", topic, id, err)
			}
			o, err := parseOwner(data)
			if err != nil {
				c.log.Error("unreadable assignment: placing the partition again", "topic", topic, "partition", id, "err", err)
				out[PartitionID{topic, n}] = Owned{Version: st.Version, Zxid: st.Mzxid}
				continue
			}
			out[PartitionID{topic, n}] = Owned{Owner: o, Version: st.Version, Zxid: st.Mzxid}
		}
	}
	return out, nil
}

// setOwner writes an assignment if its znode is still at version (-1: create it).
func (c *Cluster) setOwner(pid PartitionID, o Owner, version int32) error {
	data, _ := json.Marshal(o)
	p := path.Join(c.root, "assignments", pid.Topic, strconv.Itoa(pid.ID))
	if version < 0 {
		if err := c.ensure(path.Dir(p)); err != nil {
			return err
		}
		_, err := c.conn.Create(p, data, 0, zk.WorldACL(zk.PermAll))
		return err
	}
	_, err := c.conn.Set(p, data, version)
	return err
}

// Lead runs the leader's placement until ctx ends or the session is lost: whenever the
// brokers or the topics change, and every interval (a rebalance moves MaxMoves at a time),
// it places every partition (Place) and writes the assignments that changed, each
// conditional on the version it read, with the epoch raised. Only the elected leader
// may call it (Campaign).
func (c *Cluster) Lead(ctx context.Context, lim Limits, interval time.Duration) error {
	expired := c.Expired()
	c.stats.leading.Store(true)
	defer c.stats.leading.Store(false)
	good := map[PartitionID]Owner{} // the last readable assignment of each partition
	var bch, tch <-chan zk.Event    // armed until they fire (BrokersW says why)
	for {
		var (
			brokers []BrokerInfo
			topics  map[string]TopicInfo
			err     error
		)
		if bch == nil {
			brokers, bch, err = c.BrokersW()
		} else {
			brokers, err = c.Brokers()
		}
		if err != nil {
			return err
		}
		if tch == nil {
			topics, tch, err = c.TopicsW()
		} else {
			topics, err = c.Topics()
		}
		if err != nil {
			return err
		}
		owners, err := c.Owners()
		if err != nil {
			return err
		}
		// An assignment that cannot be read (edited by hand) is taken as it last was:
		// its broker may still hold the partition, and a move must wait for it. The
		// znode is written again as it was. A leader that never read it (it took over
		// after the damage) takes it from the brokers' load reports: the broker that
		// reports serving the partition, under the epoch it reports.
		junk := map[PartitionID]bool{}
		for pid, o := range owners {
			if o.Broker != "" {
				good[pid] = o.Owner
				continue
			}
			g, ok := good[pid]
			if !ok {
				g, ok = reportedOwner(brokers, pid)
			}
			if ok {
				owners[pid], junk[pid] = Owned{Owner: g, Version: o.Version, Zxid: o.Zxid}, true
			}
		}
		if err := c.placeOnce(brokers, topics, owners, junk, lim); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-expired:
			return errors.New("ZooKeeper session expired: no longer the leader")
		case <-bch:
			bch = nil
		case <-tch:
			tch = nil
		case <-time.After(interval):
		}
	}
}

// reportedOwner returns the assignment a partition's holder reports in its load figures
// (the newest epoch, should two report it); false when no live broker reports serving it.
// Reports are up to a report interval old (5 s): a broker that loaded the partition
// within it may be missing. Brokers keep what they serve while its assignment is
// unreadable, so the holder of a damaged assignment has usually held it longer.
func reportedOwner(brokers []BrokerInfo, pid PartitionID) (Owner, bool) {
	key := LoadKey(pid)
	var o Owner
	for _, b := range brokers {
		if l, ok := b.Partitions[key]; ok && l.Epoch > o.Epoch {
			o = Owner{Broker: b.ID, Epoch: l.Epoch}
		}
	}
	return o, o.Epoch > 0
}

// placeOnce computes one placement and writes what changed.
func (c *Cluster) placeOnce(brokers []BrokerInfo, topics map[string]TopicInfo, owners map[PartitionID]Owned, junk map[PartitionID]bool, lim Limits) error {
	live := make([]Broker, 0, len(brokers))
	for _, b := range brokers {
		// A broker whose registration this leader never read good lives: it keeps what
		// it holds (a move would not wait for its release) and is given nothing.
		live = append(live, Broker{ID: b.ID, Capacity: b.Capacity, HoldOnly: b.Unreadable})
	}
	reported := map[string]PartLoad{}
	for _, b := range brokers {
		for k, l := range b.Partitions {
			if o, ok := owners[ParseLoadKey(k)]; ok && o.Broker == b.ID {
				reported[k] = l // only the owner's figures: a broker that gave it up may lag
			}
		}
	}
	var parts []Partition
	prev := Assignment{}
	names := make([]string, 0, len(topics))
	for n := range topics {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		for i := range topics[n].Partitions {
			pid := PartitionID{n, i}
			parts = append(parts, Partition{PartitionID: pid, Load: weight(reported[LoadKey(pid)])})
			if o, ok := owners[pid]; ok && o.Broker != "" {
				prev[pid] = o.Broker
			}
		}
	}
	next := Place(live, parts, prev, lim)
	c.stats.pass(len(brokers), len(parts), len(next), c.regs.unreadable(), c.topicsRead.unreadable())
	since := map[string]int64{} // the live brokers, and when each registered
	for _, b := range brokers {
		since[b.ID] = b.Since
	}
	changed := false
	defer func() {
		if changed {
			if err := c.bumpGeneration(); err != nil {
				c.log.Error("assignments written but the brokers not told: they find them at their next resync", "err", err)
			}
		}
	}()
	for _, p := range parts {
		b, ok := next[p.PartitionID]
		o, had := owners[p.PartitionID]
		if ok && b == prev[p.PartitionID] && junk[p.PartitionID] { // repair it as it was
			if err := c.setOwner(p.PartitionID, o.Owner, o.Version); err != nil {
				return fmt.Errorf("cannot repair the assignment of %v: %w", p.PartitionID, err)
			}
			c.stats.repaired.Add(1)
			c.log.Warn("repaired an unreadable assignment as it last was", "topic", p.Topic, "partition", p.ID, "broker", b)
			continue
		}
		if !ok || b == prev[p.PartitionID] {
			continue
		}
		version := int32(-1)
		if had {
			version = o.Version
		}
		from, err := c.holder(p.PartitionID, o, since)
		if err != nil {
			return err
		}
		err = c.setOwner(p.PartitionID, Owner{Broker: b, Epoch: o.Epoch + 1, From: from}, version)
		if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("assignment of %v changed under the leader (another leader?): %w", p.PartitionID, err)
		}
		if err != nil {
			return fmt.Errorf("cannot assign %v to %s: %w", p.PartitionID, b, err)
		}
		changed = true
		c.stats.moves.Add(1)
		c.log.Info("assigned", "topic", p.Topic, "partition", p.ID, "broker", b, "epoch", o.Epoch+1, "from", from)
	}
	return nil
}

// holder returns the live broker that may still hold a partition about to move, for the
// new owner to wait for its release; "" when no live broker may. since maps each live
// broker to when it registered. That is the broker it is assigned to, unless the move
// to that broker still waits for the broker it came from: o.From has not released it
// as of o.Epoch and has stayed registered since the assignment was written (the new
// owner loads only after a release or once From is gone). Then the partition is still
// held there, however many times it moves on meanwhile (to a broker that dies before
// loading it, or that gives it up unloaded).
//
// A From that registered again after the assignment lost its session in between: it
// gave up everything then, and the assigned broker may have loaded the partition while
// From was gone. Naming From again would let the next owner load while the assigned
// broker still serves and acknowledges writes (a chaos run lost a record that way: the
// paused broker came back, was named the holder, and the partition moved back to it).
func (c *Cluster) holder(pid PartitionID, o Owned, since map[string]int64) (string, error) {
	if reg, alive := since[o.From]; o.From != "" && o.From != o.Broker && alive && reg < o.Zxid {
		r, ok, err := c.Released(pid)
		if err != nil {
			return "", err
		}
		if !ok || r.Broker != o.From || r.Epoch < o.Epoch {
			return o.From, nil
		}
	}
	if _, alive := since[o.Broker]; alive {
		return o.Broker, nil
	}
	return "", nil
}

// loadUnit is the produce rate that weighs as much as a partition's presence: an idle
// partition weighs 1, one taking 10 MiB/s weighs 11. Partition counts still spread idle
// topics evenly; busy partitions count for more.
const loadUnit = 1 << 20

// weight is a partition's placement load from its reported figures.
func weight(l PartLoad) float64 { return 1 + max(l.BytesPerSec, 0)/loadUnit }

// ParseLoadKey reverses LoadKey (a zero PartitionID for a malformed key). Only the
// spelling LoadKey writes is taken: "t/01", "t/+1" and "t/-1" are malformed, not aliases
// of partition 1 or a negative one.
func ParseLoadKey(k string) PartitionID {
	i := strings.LastIndexByte(k, '/')
	if i <= 0 {
		return PartitionID{}
	}
	id, ok := parseID(k[i+1:])
	if !ok {
		return PartitionID{}
	}
	return PartitionID{Topic: k[:i], ID: id}
}
