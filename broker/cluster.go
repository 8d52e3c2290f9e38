package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"sluice/admin"
	"sluice/internal/failpoint"
	"sluice/wire"
)

// Distributed mode's cluster half (docs/cluster.md): with ZooKeeper addresses set, the
// broker registers, and serves exactly the partitions the admin leader assigns it,
// loading each from HDFS (cluster_load.go) and giving up each that moves away (ship
// everything, then release it: unload before load). Topics come from ZooKeeper, not from
// the data directory, which is only this host's cache of what it serves.
//
// Fencing: the broker holds a write lease, renewed by a round trip to ZooKeeper every
// fifth of the session timeout and valid for half the session timeout from when that
// round trip was sent (ZooKeeper cannot expire the session before the full timeout from
// then). Without a valid lease it answers produce not_owner and passes no HDFS
// acknowledgment on to the checkpoint: a broker paused past its session, whose
// partitions moved, wakes up with an expired lease and cannot acknowledge a write. On a
// session expiry it gives every partition up at once (they may have moved) and loads
// again those still assigned to it, in a new session S.

// ClusterConfig turns on the cluster: brokers registered in ZooKeeper, partitions
// placed by the admin. It needs HDFS (the shared copy partitions move through).
type ClusterConfig struct {
	ZK             []string      // zk: ZooKeeper addresses; none: the embedded default
	Root           string        // zk.root: the cluster's znodes (default /sluice)
	ID             string        // broker.id: this broker's name (default its address)
	SessionTimeout time.Duration // zk.session_timeout (default 6s)
	Capacity       float64       // this broker's share weight (default 1)
	// Digest authenticates the session to ZooKeeper (zk.auth): it then reads the
	// security znodes that `sluice user/acl --zk-auth` lock with it. Zero: none.
	Digest admin.Digest
}

// Enabled reports whether the broker follows a cluster.
func (c *ClusterConfig) Enabled() bool { return len(c.ZK) > 0 }

// clusterState is a broker's view of the cluster.
type clusterState struct {
	c       *admin.Cluster
	id      string
	timeout time.Duration
	// lease is the driver-clock time (Broker.now) until which writes are allowed; 0:
	// never. leaseSession is the session it was confirmed on: a new session renews it
	// only after the broker gave up what it held (follow).
	lease        atomic.Int64
	leaseSession atomic.Int64
	stop         chan struct{}
	kick         chan struct{} // a load or unload ended: look at the assignments again
	wg           sync.WaitGroup
	loads        atomic.Uint64 // partitions loaded
	unloads      atomic.Uint64 // partitions given up

	mu struct {
		sync.Mutex
		addrs    map[string]string // broker id -> address, of live brokers
		owners   map[admin.PartitionID]admin.Owned
		prev     map[admin.PartitionID]admin.Owned // the reading before owners
		busy     map[admin.PartitionID]bool        // a load or unload under way
		released map[admin.PartitionID]uint64      // the epoch of this broker's last release
	}
}

// leased reports whether writes are allowed at driver time now.
func (cl *clusterState) leased(now int64) bool { return now < cl.lease.Load() }

// errNotOwner is why a partition this broker does not hold is not open here.
var errNotOwner = errors.New("not served by this broker: refresh the metadata")

// errNotAssigned is the offline reason of a partition this broker does not hold.
func errNotAssigned(topic string, id int) error {
	return fmt.Errorf("partition %s/%d is %w", topic, id, errNotOwner)
}

// dialCluster connects to ZooKeeper, before the broker serves (requests read b.cl).
func (b *Broker) dialCluster() error {
	cc := b.cfg.Cluster
	ctx, cancel := context.WithTimeout(context.Background(), 3*cc.SessionTimeout)
	defer cancel()
	var opts []admin.DialOption
	if cc.Digest != (admin.Digest{}) {
		opts = append(opts, admin.WithDigest(cc.Digest))
	}
	c, err := admin.Dial(ctx, cc.ZK, cc.Root, cc.SessionTimeout, b.cfg.Logger, opts...)
	if err != nil {
		return fmt.Errorf("cannot join the cluster: %w", err)
	}
	cl := &clusterState{c: c, timeout: cc.SessionTimeout, stop: make(chan struct{}), kick: make(chan struct{}, 1)}
	cl.mu.addrs = map[string]string{}
	cl.mu.busy = map[admin.PartitionID]bool{}
	cl.mu.released = map[admin.PartitionID]uint64{}
	b.cl = cl
	return nil
}

// joinCluster registers and starts following the assignments, once the broker serves
// (its address is known).
func (b *Broker) joinCluster() error {
	cc, cl := b.cfg.Cluster, b.cl
	cl.id = cc.ID
	if cl.id == "" {
		cl.id = b.Addr()
	}
	if err := cl.c.Register(admin.BrokerInfo{ID: cl.id, Addr: b.Addr(), Capacity: cc.Capacity}); err != nil {
		return fmt.Errorf("cannot join the cluster: %w", err)
	}
	b.renewLease() // the lease needs the registration
	cl.wg.Add(2)
	go b.heartbeat()
	go b.follow()
	b.cfg.Logger.Info("joined the cluster", "broker", cl.id, "zk", strings.Join(cc.ZK, ","), "root", cc.Root,
		"session_timeout", cl.c.SessionTimeout())
	return nil
}

// leaveCluster stops following, waits for loads and unloads under way, and ends the
// session (the registration goes at once, so the leader moves the partitions now).
func (b *Broker) leaveCluster() {
	if b.cl == nil {
		return
	}
	close(b.cl.stop)
	b.cl.wg.Wait()
	b.cl.lease.Store(0) // before the session ends: nothing more is acknowledged under it
	b.cl.c.Close()
}

// heartbeat renews the write lease every fifth of the session timeout, and passes on
// the HDFS acknowledgments that came while it was not confirmed.
func (b *Broker) heartbeat() {
	defer b.cl.wg.Done()
	t := time.NewTicker(max(b.cl.timeout/5, 20*time.Millisecond))
	defer t.Stop()
	lr := loadReport{last: time.Now(), appended: map[*part]uint64{}}
	for {
		select {
		case <-b.cl.stop:
			return
		case now := <-t.C:
			if now.Sub(lr.last) >= loadEvery {
				b.reportLoad(&lr, now)
			}
		}
		if b.renewLease() {
			b.passLateShipped()
		}
	}
}

// loadEvery is how often a broker refreshes its load figures in its registration.
const loadEvery = 5 * time.Second

// loadReport is what the last load report saw.
type loadReport struct {
	last     time.Time
	appended map[*part]uint64 // bytes accepted since load, by part
}

// reportLoad publishes every held partition's produce rate since the last report and
// its HDFS lag in the broker's registration; the leader places by them.
func (b *Broker) reportLoad(lr *loadReport, now time.Time) {
	secs := now.Sub(lr.last).Seconds()
	lags := map[admin.PartitionID]float64{}
	_, _, _, stats := b.shipper.Stats()
	for _, ps := range stats {
		lags[admin.PartitionID{Topic: ps.Topic, ID: ps.Partition}] = ps.Lag.Seconds()
	}
	info := admin.BrokerInfo{ID: b.cl.id, Addr: b.Addr(), Capacity: b.cfg.Cluster.Capacity, Partitions: map[string]admin.PartLoad{}}
	next := make(map[*part]uint64, len(lr.appended))
	b.mu.RLock()
	for _, parts := range b.mu.byShard {
		for _, pt := range parts {
			n := pt.appended.Load()
			next[pt] = n
			pid := admin.PartitionID{Topic: pt.topic.meta.Name, ID: pt.id}
			rate := float64(n-min(n, lr.appended[pt])) / secs
			info.Load += rate
			pl := admin.PartLoad{BytesPerSec: rate, HDFSLag: lags[pid]}
			if pt.p != nil && !pt.unloading.Load() {
				pl.Epoch = pt.epoch
			}
			info.Partitions[admin.LoadKey(pid)] = pl
		}
	}
	b.mu.RUnlock()
	lr.last, lr.appended = now, next
	if err := b.cl.c.UpdateRegistration(info); err != nil {
		b.cfg.Logger.Warn("cannot report load", "err", err)
	}
}

// renewLease makes one round trip to ZooKeeper and, on the session the lease was last
// confirmed on and holding the broker's registration, extends the lease to half the
// session timeout from when it was sent.
func (b *Broker) renewLease() bool {
	cl := b.cl
	sent := b.now()
	session := cl.c.SessionID()
	if session == 0 || cl.c.Ping(cl.id, session) != nil {
		return false
	}
	if cl.leaseSession.Load() == 0 {
		cl.leaseSession.Store(session) // the first session
	}
	if session != cl.leaseSession.Load() {
		return false // a new session: follow gives everything up first
	}
	timeout := min(cl.timeout, cl.c.SessionTimeout())
	cl.lease.Store(sent + int64(timeout/2))
	return true
}

// passLateShipped passes on the HDFS acknowledgments held back while the lease lapsed.
func (b *Broker) passLateShipped() {
	b.mu.RLock()
	var late []*part
	for _, parts := range b.mu.byShard {
		for _, pt := range parts {
			if pt.lateShipped.Load() > 0 {
				late = append(late, pt)
			}
		}
	}
	b.mu.RUnlock()
	for _, pt := range late {
		if next := pt.lateShipped.Swap(0); next > 0 {
			b.passShipped(pt, next)
		}
	}
}

// follow keeps the partitions this broker serves in line with its assignments: it reads
// the topics, the live brokers and the assignments, acts on the differences, and waits
// for ZooKeeper to say something changed (or a resync interval, or the session expired).
func (b *Broker) follow() {
	cl := b.cl
	defer cl.wg.Done()
	var topics map[string]admin.TopicInfo
	var brokers []admin.BrokerInfo
	var tch, bch, ach <-chan admin.Event
	expired := cl.c.Expired()
	failing := false
	for {
		var err error
		// Each watch stays armed until it fires: arming one per pass would pile up
		// channels in the ZooKeeper client while nothing changes (admin.BrokersW).
		if tch == nil {
			topics, tch, err = cl.c.TopicsW()
		} else {
			topics, err = cl.c.Topics() // an expansion changes a topic's znode, not the list
		}
		if err == nil && bch == nil {
			brokers, bch, err = cl.c.BrokersW()
		}
		var owners map[admin.PartitionID]admin.Owned
		if err == nil && ach == nil {
			owners, ach, err = cl.c.AssignmentsW()
		} else if err == nil {
			owners, err = cl.c.Owners()
		}
		if err != nil {
			tch, bch, ach = nil, nil, nil // read everything again
			if !failing {
				b.cfg.Logger.Warn("cannot read the cluster state: retrying", "err", err)
			}
			failing = true
		} else {
			failing = false
			b.reconcile(topics, brokers, owners)
		}
		retry := time.After(followResync)
		if failing {
			retry = time.After(followRetry)
		}
		select {
		case <-cl.stop:
			return
		case <-expired:
			expired = cl.c.Expired()
			b.giveUpAll()
			if failpoint.On("expiry_reread", "cluster") {
				// Tests: hold what giveUpAll left for metadata to be read, as a slow
				// reading of a large cluster would (a live ZooKeeper answers in ms).
				select {
				case <-cl.stop:
					return
				case <-time.After(expiryRereadHold):
				}
			}
			tch, bch, ach = nil, nil, nil
			cl.leaseSession.Store(cl.c.SessionID())
		case <-tch:
			tch = nil
		case <-bch:
			bch = nil
		case <-ach:
			ach = nil
		case <-cl.kick: // a load or unload ended: what changed meanwhile waits no longer
		case <-retry:
		}
	}
}

// expiryRereadHold is how long the failpoint expiry_reread holds the reading after a
// session expiry.
const expiryRereadHold = 10 * time.Second

const (
	// followResync re-reads the assignments even when no watch fired.
	followResync = 5 * time.Second
	// followRetry is the pause after ZooKeeper could not be read.
	followRetry = 250 * time.Millisecond
	// releaseWait is how often a load waiting for the previous broker's release looks.
	releaseWait = 50 * time.Millisecond
)

// reconcile acts on one reading of the cluster state: new topics are listed (their
// partitions answer not_owner until loaded), partitions assigned here are loaded,
// partitions assigned elsewhere are given up and released.
func (b *Broker) reconcile(topics map[string]admin.TopicInfo, brokers []admin.BrokerInfo, owners map[admin.PartitionID]admin.Owned) {
	cl := b.cl
	for name, ti := range topics {
		b.addClusterTopic(name, ti)
	}
	var releases []release
	cl.mu.Lock()
	cl.mu.addrs = make(map[string]string, len(brokers))
	for _, br := range brokers {
		cl.mu.addrs[br.ID] = br.Addr
	}
	cl.mu.prev, cl.mu.owners = cl.mu.owners, owners
	for pid, o := range owners {
		if cl.mu.busy[pid] {
			continue // its goroutine reads the owners again when done
		}
		if o.Broker == "" {
			// The leader never writes an assignment without a broker: this one could
			// not be read (edited by hand?). Keep what is served as it is until the
			// leader writes it again.
			if prev, ok := cl.mu.prev[pid]; ok {
				cl.mu.owners[pid] = prev
			}
			continue
		}
		pt := b.partOf(pid)
		if pt == nil {
			continue // a topic not listed yet: the next pass
		}
		held := pt.p != nil
		switch {
		case o.Broker == cl.id && (!held || pt.epoch != o.Epoch || pt.unloading.Load()):
			// (unloading and not busy: given up at a session expiry while its load was
			// ending; takeOver closes it and loads it again)
			cl.mu.busy[pid] = true
			cl.wg.Add(1)
			go b.takeOver(pid, pt, o.Owner)
		case o.Broker != cl.id && held:
			cl.mu.busy[pid] = true
			cl.wg.Add(1)
			go b.giveUp(pid, pt, true)
		case o.Broker == cl.id && b.switchDue(pt):
			cl.mu.busy[pid] = true
			cl.wg.Add(1)
			go b.switchPart(pid, pt)
		case o.Broker != cl.id && o.From == cl.id && cl.mu.released[pid] < o.Epoch:
			// Never loaded here (or given up already): nothing to ship. Written after
			// cl.mu is released (metadata on the event loops waits for it).
			releases = append(releases, release{pid, o.Epoch})
		}
	}
	cl.mu.Unlock()
	for _, r := range releases {
		if err := cl.c.Release(r.pid, cl.id, r.epoch, 0); err != nil {
			b.cfg.Logger.Warn("cannot release a partition: retrying", "topic", r.pid.Topic, "partition", r.pid.ID, "err", err)
			continue
		}
		cl.mu.Lock()
		cl.mu.released[r.pid] = max(cl.mu.released[r.pid], r.epoch)
		cl.mu.Unlock()
	}
}

// release is a release reconcile writes.
type release struct {
	pid   admin.PartitionID
	epoch uint64
}

// figures returns what the broker last read of the cluster: live brokers, and the
// partitions assigned to a live broker, to a dead one, or to none (for /metrics).
func (cl *clusterState) figures() (brokers, live, dead, none int) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for _, o := range cl.mu.owners {
		switch _, ok := cl.mu.addrs[o.Broker]; {
		case o.Broker == "":
			none++
		case ok:
			live++
		default:
			dead++
		}
	}
	return len(cl.mu.addrs), live, dead, none
}

// partOf returns a partition's current part, nil for an unknown one.
func (b *Broker) partOf(pid admin.PartitionID) *part {
	b.mu.RLock()
	defer b.mu.RUnlock()
	t := b.mu.topics[pid.Topic]
	if t == nil || pid.ID >= len(t.parts) {
		return nil
	}
	return t.parts[pid.ID]
}

// addClusterTopic lists a topic read from ZooKeeper, every partition unassigned. A topic
// already listed takes a later version (an expansion: growTopicLocked); a count that
// went down is logged and not followed.
func (b *Broker) addClusterTopic(name string, ti admin.TopicInfo) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.mu.topics[name]; t != nil {
		switch {
		case ti.Version > t.meta.Version && ti.Partitions > t.meta.Partitions && ti.Partitions <= wire.MaxPartitions:
			b.growTopicLocked(t, ti)
		case ti.Partitions != t.meta.Partitions && ti.Version >= t.meta.Version:
			b.cfg.Logger.Error("topic changed its partition count in ZooKeeper without an expansion: not followed", "topic", name,
				"partitions", t.meta.Partitions, "version", t.meta.Version, "zookeeper", ti.Partitions, "zookeeper_version", ti.Version)
		}
		return
	}
	if wire.CheckTopicName(name) != nil || ti.Partitions > wire.MaxPartitions {
		b.cfg.Logger.Error("topic in ZooKeeper not served: bad name or partition count", "topic", name, "partitions", ti.Partitions)
		return
	}
	t := &topic{meta: topicMeta{Name: name, Version: max(ti.Version, 1), Partitions: ti.Partitions,
		Options: b.resolveOptions(ti.Options), History: ti.History}}
	for i := range ti.Partitions {
		pt := b.newPart(t, i)
		pt.offline = errNotAssigned(name, i)
		t.parts = append(t.parts, pt)
	}
	b.addTopicLocked(t)
}

// done ends a load or unload of pid and has the owners looked at again (they may have
// changed while it ran).
func (b *Broker) done(pid admin.PartitionID) {
	cl := b.cl
	cl.mu.Lock()
	delete(cl.mu.busy, pid)
	cl.mu.Unlock()
	select {
	case cl.kick <- struct{}{}:
	default: // a look is due already
	}
	cl.wg.Done()
}

// ownerOf returns the partition's assignment as last read.
func (cl *clusterState) ownerOf(pid admin.PartitionID) admin.Owned {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.mu.owners[pid]
}

// stopping reports whether the broker leaves the cluster.
func (cl *clusterState) stopping() bool {
	select {
	case <-cl.stop:
		return true
	default:
		return false
	}
}

// addrOf returns the address of a partition's broker ("" when unassigned or its broker
// is not registered).
func (cl *clusterState) addrOf(pid admin.PartitionID) string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.mu.addrs[cl.mu.owners[pid].Broker]
}

// createClusterTopic creates a topic in ZooKeeper (the admin leader places it) and
// waits, up to the session timeout, until this broker lists it.
func (b *Broker) createClusterTopic(name string, partitions int, opts wire.TopicOptions) error {
	err := b.cl.c.CreateTopic(name, admin.TopicInfo{Partitions: partitions, Version: 1, Options: opts})
	if errors.Is(err, admin.ErrTopicExists) {
		return wire.NewError(wire.CodeTopicExists, fmt.Sprintf("topic %s exists", name))
	}
	if err != nil {
		return wire.NewError(wire.CodeNotServing, err.Error())
	}
	deadline := time.Now().Add(b.cl.timeout)
	for time.Now().Before(deadline) {
		if b.partOf(admin.PartitionID{Topic: name}) != nil {
			break
		}
		time.Sleep(releaseWait)
	}
	b.cfg.Logger.Info("created topic in ZooKeeper", "topic", name, "partitions", partitions)
	return nil
}
