package broker

import (
	"errors"
	"time"

	"sluice/admin"
	"sluice/wire"
)

// Topic expansion in distributed mode (docs/cluster.md, "Expansion"). The request writes
// the topic's znode (admin.ExpandTopic); every broker then lists the new partitions
// (unassigned until the admin leader places them) and switches each old partition it
// holds to the new version: appends stop, the broker waits until C covers everything
// appended (so any later load starts at or past the switch offset), records the switch
// offset in ZooKeeper, and raises the partition's version. A broker that loads an old
// partition after the expansion records its load point as the switch offset if none was
// recorded (nothing of the new layout was appended before it).

// expandTopic raises a topic's partition count and answers its new metadata.
func (b *Broker) expandTopic(r *wire.ExpandTopicRequest) (*wire.ExpandTopicResponse, error) {
	if err := wire.CheckTopicName(r.Name); err != nil {
		return nil, err
	}
	if b.cl == nil {
		return nil, wire.NewError(wire.CodeInvalidConfig,
			"topic expansion needs distributed mode (-zk): an embedded broker's topics keep their partition count")
	}
	ti, err := b.cl.c.ExpandTopic(r.Name, int(r.Partitions))
	switch {
	case errors.Is(err, admin.ErrUnknownTopic):
		return nil, wire.NewError(wire.CodeUnknownTopic, err.Error())
	case errors.Is(err, admin.ErrNotMore):
		return nil, wire.NewError(wire.CodeInvalidConfig, err.Error())
	case errors.Is(err, admin.ErrTopicChanged):
		return nil, wire.NewError(wire.CodeTopicChanged, err.Error())
	case err != nil:
		return nil, wire.NewError(wire.CodeNotServing, err.Error())
	}
	b.addClusterTopic(r.Name, ti)
	b.cfg.Logger.Info("expanded topic", "topic", r.Name, "partitions", ti.Partitions, "version", ti.Version)
	md := b.metadata(&wire.MetadataRequest{Topics: []string{r.Name}}, nil) // admit checked the grant
	if len(md.Topics) == 0 {
		return nil, wire.NewError(wire.CodeNotServing, "topic "+r.Name+" expanded in ZooKeeper but not listed here")
	}
	return &wire.ExpandTopicResponse{Topic: md.Topics[0]}, nil
}

// topicLayouts answers a topic's layouts: from ZooKeeper in distributed mode (the switch
// offsets are recorded there), else the one layout an embedded topic has.
func (b *Broker) topicLayouts(name string) (*wire.TopicLayoutsResponse, error) {
	if err := wire.CheckTopicName(name); err != nil {
		return nil, err
	}
	if b.cl == nil {
		b.mu.RLock()
		t := b.mu.topics[name]
		var l wire.Layout
		if t != nil {
			l = wire.Layout{Version: t.meta.Version, Partitions: uint32(t.meta.Partitions)}
		}
		b.mu.RUnlock()
		if t == nil {
			return nil, wire.NewError(wire.CodeUnknownTopic, "unknown topic "+name)
		}
		return &wire.TopicLayoutsResponse{Name: name, Layouts: []wire.Layout{l}}, nil
	}
	ls, err := b.cl.c.Layouts(name)
	switch {
	case errors.Is(err, admin.ErrUnknownTopic):
		return nil, wire.NewError(wire.CodeUnknownTopic, err.Error())
	case err != nil:
		return nil, wire.NewError(wire.CodeNotServing, err.Error())
	}
	return &wire.TopicLayoutsResponse{Name: name, Layouts: ls}, nil
}

// growTopicLocked takes a topic's new layout from ZooKeeper: the new version and history,
// and the new partitions, each unassigned (not_owner) until loaded. Requires b.mu held for
// writing.
func (b *Broker) growTopicLocked(t *topic, ti admin.TopicInfo) {
	from := t.meta.Partitions
	t.meta.Version, t.meta.Partitions, t.meta.History = ti.Version, ti.Partitions, ti.Layouts()
	for i := from; i < ti.Partitions; i++ {
		pt := b.newPart(t, i)
		pt.offline = errNotAssigned(t.meta.Name, i)
		t.parts = append(t.parts, pt)
	}
	b.mu.partitions += ti.Partitions - from
	b.cfg.Logger.Info("topic expanded in ZooKeeper: new partitions listed", "topic", t.meta.Name,
		"partitions", ti.Partitions, "from", from, "version", ti.Version)
}

// partitionsAt returns how many partitions a topic with these layouts (oldest first) has
// at version v: the last layout's at or below v (0: none).
func partitionsAt(layouts []admin.Layout, v uint32) int {
	n := 0
	for _, l := range layouts {
		if l.Version <= v {
			n = l.Partitions
		}
	}
	return n
}

// layoutOf returns a topic's current version and its layouts, read under b.mu (an
// expansion changes them).
func (b *Broker) layoutOf(t *topic) (uint32, []admin.Layout) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if len(t.meta.History) == 0 {
		return t.meta.Version, []admin.Layout{{Version: t.meta.Version, Partitions: t.meta.Partitions}}
	}
	return t.meta.Version, t.meta.History
}

// switchDue reports whether a partition held here serves an older version than its
// topic's: it switches (switchPart).
func (b *Broker) switchDue(pt *part) bool {
	v, _ := b.layoutOf(pt.topic)
	return pt.p != nil && pt.p.Version() < v
}

// switchPart switches a partition held here to its topic's current version: appends
// stop at the switch offset; once C covers everything before it (and the lease holds) the
// offset is recorded in ZooKeeper for each version the partition changes layout at; then
// the partition serves the new version. If the partition is given up meanwhile, appends
// go on as they were (nothing was recorded); the next pass tries again. Once a record
// was asked for, the partition stays frozen whatever happens (ZooKeeper may have
// created the znode and lost its answer): the next pass finds the offset its own, or the
// partition is given up frozen, its last offset the recorded one.
func (b *Broker) switchPart(pid admin.PartitionID, pt *part) {
	defer b.done(pid)
	cl := b.cl
	thaw := func() {
		if !pt.switchAsked.Load() {
			pt.p.Thaw()
		}
	}
	o := cl.ownerOf(pid)
	version, layouts := b.layoutOf(pt.topic)
	var due []uint32
	for _, v := range admin.SwitchesDue(layouts, pid.ID) {
		if v > pt.p.Version() {
			due = append(due, v)
		}
	}
	at := pt.p.Freeze()
	for logged := time.Now(); pt.p.Window().Checkpoint < at-1; {
		if cl.stopping() || !cl.assigned(pid, o.Owner) || pt.unloading.Load() {
			thaw()
			return
		}
		if time.Since(logged) > 10*time.Second {
			b.cfg.Logger.Warn("a partition's switch to a new topic version waits for its checkpoint", "topic", pid.Topic,
				"partition", pid.ID, "switch", at, "checkpoint", pt.p.Window().Checkpoint)
			logged = time.Now()
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !cl.leased(b.now()) || !cl.assigned(pid, o.Owner) {
		thaw()
		time.Sleep(followRetry) // the next pass tries again
		return
	}
	pt.switchAsked.Store(true)
	for _, v := range due {
		got, err := cl.c.RecordSwitch(pid.Topic, v, pid.ID, at)
		if err != nil {
			b.cfg.Logger.Warn("cannot record a partition's switch: trying again, appends stay stopped", "topic", pid.Topic,
				"partition", pid.ID, "version", v, "switch", at, "err", err)
			time.Sleep(followRetry)
			return
		}
		if got != at {
			// Another broker loaded the partition after the expansion (this one lost it
			// while waiting): it stays frozen here until it is given up.
			b.cfg.Logger.Error("a partition's switch was recorded by another broker: it takes no more writes here",
				"topic", pid.Topic, "partition", pid.ID, "version", v, "recorded", got, "here", at)
			return
		}
	}
	pt.p.Switch(version, partitionsAt(layouts, version))
	pt.switchAsked.Store(false) // recorded: a later expansion's freeze may be undone again
	b.cfg.Logger.Info("switched to a new topic version", "topic", pid.Topic, "partition", pid.ID, "version", version,
		"switch_offset", at, "recorded", len(due))
}

// recordLoadSwitches records, for a partition loaded at offset next after an expansion,
// the switch of every version it changes layout at that none recorded yet: nothing of the
// new layout was appended before the load (a partition switches only once C covers its
// switch offset, so a recorded switch is at or below the load point).
func (b *Broker) recordLoadSwitches(pid admin.PartitionID, layouts []admin.Layout, next int64) error {
	for _, v := range admin.SwitchesDue(layouts, pid.ID) {
		got, err := b.cl.c.RecordSwitch(pid.Topic, v, pid.ID, next)
		if err != nil {
			return err
		}
		if got > next {
			b.cfg.Logger.Error("BUG: a partition's recorded switch is past its load point", "topic", pid.Topic,
				"partition", pid.ID, "version", v, "switch", got, "load", next)
		}
	}
	return nil
}
