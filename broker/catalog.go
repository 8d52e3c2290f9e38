package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"sluice/admin"
	"sluice/engine"
	"sluice/internal/dirlock"
	"sluice/persist"
	"sluice/persist/local"
	"sluice/persist/vfs"
	"sluice/wire"
)

// The catalog: topics on disk, opened at start and created on request. A topic is a
// directory DATA/NAME holding topic.json and one directory per partition.

// metaFile is the file in a topic's directory that records its version and options.
const metaFile = "topic.json"

// creatingPrefix names a topic directory under construction: a creation builds
// DATA/+creating.NAME.NONCE and renames it to DATA/NAME last, so a topic directory either
// is whole or does not exist. Start removes what an interrupted creation left. '+' is
// not allowed in topic names, so no topic can be taken for a leftover.
const creatingPrefix = "+creating."

// topicMeta is what is stored about a topic.
type topicMeta struct {
	Name       string            `json:"name"`
	Version    uint32            `json:"version"`
	Partitions int               `json:"partitions"`
	Options    wire.TopicOptions `json:"options"`
	// History is the topic's layouts, oldest first (distributed mode, after an expansion;
	// empty otherwise).
	History []admin.Layout `json:"history,omitempty"`
}

// topic is a loaded topic. Name and Options never change; an expansion (distributed
// mode) changes Version, Partitions and History and appends to parts, under b.mu held
// for writing: read them under b.mu.
type topic struct {
	meta  topicMeta
	parts []*part
}

func (b *Broker) topicDir(name string) string { return filepath.Join(b.cfg.DataDir, name) }

// resolveOptions fills a create request's zero options with the broker's defaults.
func (b *Broker) resolveOptions(o wire.TopicOptions) wire.TopicOptions {
	if o.SegmentBytes == 0 {
		o.SegmentBytes = b.cfg.Log.SegmentBytes
	}
	if o.SegmentMs == 0 {
		o.SegmentMs = b.cfg.Log.SegmentAge.Milliseconds()
	}
	if o.RetentionBytes == 0 {
		o.RetentionBytes = -1
		if b.cfg.Log.RetentionBytes > 0 {
			o.RetentionBytes = b.cfg.Log.RetentionBytes
		}
	}
	if o.RetentionMs == 0 {
		o.RetentionMs = -1
		if b.cfg.Log.RetentionAge > 0 {
			o.RetentionMs = b.cfg.Log.RetentionAge.Milliseconds()
		}
	}
	return o
}

// logOptions returns the segment log options of a topic's partitions, checked: every
// bound is enforced here, before anything touches the disk, and the error is one line.
func (b *Broker) logOptions(o wire.TopicOptions) (local.Options, error) {
	if err := o.Validate(); err != nil { // the time options fit a time.Duration
		return local.Options{}, err
	}
	opts := b.cfg.Log
	opts.Discard = b.reaper.discard // retention's unlinks off the shards (reaper.go)
	opts.SegmentBytes = o.SegmentBytes
	// Past a century a segment never rolls by age: -1 ("never") and larger ages map there.
	opts.SegmentAge = min(time.Duration(o.SegmentMs)*time.Millisecond, local.MaxSegmentAge)
	if o.SegmentMs < 0 {
		opts.SegmentAge = local.MaxSegmentAge
	}
	opts.RetentionBytes, opts.RetentionAge = max(o.RetentionBytes, 0), 0
	if o.RetentionMs > 0 {
		opts.RetentionAge = time.Duration(o.RetentionMs) * time.Millisecond
	}
	check := opts
	check.EnsureDefaults()
	if err := check.Validate(); err != nil {
		return local.Options{}, wire.NewError(wire.CodeInvalidConfig, oneLine(err))
	}
	return opts, nil
}

// oneLine joins the lines of a (joined) error with "; ", for an answer's error text.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// loadTopics opens every topic found in the data directory. What an interrupted creation
// left is removed; a directory that is not a topic is skipped and reported, never a
// reason to refuse to start; a partition that cannot be opened is served offline
// (requests to it get not_serving with the reason) while the others serve.
func (b *Broker) loadTopics() error {
	ents, err := os.ReadDir(b.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("cannot list data directory %s: %w", b.cfg.DataDir, err)
	}
	for _, e := range ents {
		if !e.IsDir() || e.Name() == dirlock.Name {
			continue
		}
		if strings.HasPrefix(e.Name(), creatingPrefix) {
			b.cfg.Logger.Warn("removing an interrupted topic creation", "dir", e.Name())
			if err := os.RemoveAll(filepath.Join(b.cfg.DataDir, e.Name())); err != nil {
				return fmt.Errorf("cannot remove interrupted creation %s: %w", e.Name(), err)
			}
			continue
		}
		m, err := b.readMeta(e.Name())
		if err != nil {
			b.skippedDirs.Add(1)
			b.cfg.Logger.Error("skipping a directory that is not a readable topic", "dir", e.Name(), "err", err)
			continue
		}
		t := b.openTopic(m)
		b.mu.Lock()
		b.addTopicLocked(t)
		b.mu.Unlock()
	}
	return nil
}

// readMeta reads and checks a topic directory's topic.json.
func (b *Broker) readMeta(name string) (topicMeta, error) {
	var m topicMeta
	raw, err := os.ReadFile(filepath.Join(b.cfg.DataDir, name, metaFile))
	if err != nil {
		return m, fmt.Errorf("cannot read %s: %w", metaFile, err)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, fmt.Errorf("bad %s: %w", metaFile, err)
	}
	if m.Name != name || wire.CheckTopicName(m.Name) != nil {
		return m, fmt.Errorf("bad %s: name %q in the directory of %q", metaFile, m.Name, name)
	}
	// The layouts are what clients route keys by across expansions (TopicLayouts): a
	// history edited by hand is refused as the admin's topic znode is.
	if err := admin.CheckLayouts(m.Version, m.Partitions, m.History); err != nil {
		return m, fmt.Errorf("bad %s: %w", metaFile, err)
	}
	return m, nil
}

// openTopic opens every partition of a topic on its shard's behalf. A partition that
// cannot be opened is kept offline with the reason.
func (b *Broker) openTopic(m topicMeta) *topic {
	m.Options = b.clampStored(m)
	t := &topic{meta: m}
	opts, err := b.logOptions(m.Options)
	var tails []tailRead
	if err == nil {
		tails = b.replicaTails(m.Name, int(m.Partitions))
	}
	for i := range m.Partitions {
		pt := b.newPart(t, i)
		if err == nil {
			pt.p, pt.offline = b.openPartition(m, i, opts, tails[i])
		} else {
			pt.offline = fmt.Errorf("bad options in %s: %w", metaFile, err)
		}
		if pt.offline != nil {
			b.cfg.Logger.Error("partition offline: it could not be opened", "topic", m.Name, "partition", i, "err", pt.offline)
		} else if derr := pt.p.Damage(); derr != nil {
			at := "OFFSET"
			if ce := (*persist.CorruptionError)(nil); errors.As(derr, &ce) && ce.Offset >= 0 {
				at = fmt.Sprint(ce.Offset)
			}
			b.cfg.Logger.Error("partition damaged: it serves what it can read and takes no writes until repaired",
				"topic", m.Name, "partition", i, "err", derr,
				"repair", "sluice segment repair "+filepath.Join(b.topicDir(m.Name), fmt.Sprint(i))+" --truncate-at "+at+" --dry-run")
		}
		t.parts = append(t.parts, pt)
	}
	return t
}

// clampStored raises roll options that an older broker accepted below today's floors (a
// segment per millisecond exhausted file descriptors), so such a topic still loads.
func (b *Broker) clampStored(m topicMeta) wire.TopicOptions {
	o := m.Options
	if minMs := local.MinSegmentAge.Milliseconds(); o.SegmentMs > 0 && o.SegmentMs < minMs {
		b.cfg.Logger.Warn("raising a stored segment.ms to the minimum", "topic", m.Name, "from", o.SegmentMs, "to", minMs)
		o.SegmentMs = minMs
	}
	if o.SegmentBytes > 0 && o.SegmentBytes < local.MinSegmentBytes {
		b.cfg.Logger.Warn("raising a stored segment.bytes to the minimum", "topic", m.Name, "from", o.SegmentBytes, "to", int64(local.MinSegmentBytes))
		o.SegmentBytes = local.MinSegmentBytes
	}
	return o
}

// openPartition opens one partition's store and its engine partition; in distributed
// mode, in line with what HDFS holds of it (openLocal).
func (b *Broker) openPartition(m topicMeta, i int, opts local.Options, tr tailRead) (*engine.Partition, error) {
	dir := filepath.Join(b.topicDir(m.Name), fmt.Sprint(i))
	l, replica, err := b.openLocal(m.Name, i, dir, opts, tr)
	if err != nil {
		return nil, fmt.Errorf("cannot open partition %s/%d: %w", m.Name, i, err)
	}
	p, err := engine.Open(engine.PartitionConfig{Topic: m.Name, ID: i, Version: m.Version,
		Session: b.newSession(), Replicated: b.cfg.HDFS.Enabled(), ReplicaStart: replica.start,
		Prior: replica.prior, Records: b.records, Partitions: m.Partitions, DedupHorizon: b.cfg.DedupHorizon}, l, b.arena)
	if err != nil {
		l.Close()
		return nil, err
	}
	return p, nil
}

// closeTopic closes the partitions of a topic that never served (a failed creation).
func closeTopic(t *topic) {
	for _, pt := range t.parts {
		if pt.p != nil {
			pt.p.Close()
		}
	}
}

// newSession returns a session value never used before by this data directory: the
// clock in nanoseconds, forced to increase within the process.
func (b *Broker) newSession() uint64 {
	for {
		last := b.lastSession.Load()
		s := max(uint64(time.Now().UnixNano()), last+1)
		if b.lastSession.CompareAndSwap(last, s) {
			return s
		}
	}
}

// createTopic creates and opens a topic. It is idempotent for an identical request.
// Every option is checked before the disk is touched; the directory is built under a
// temporary name and renamed last, so a refused or interrupted creation leaves nothing
// that stops the next start.
func (b *Broker) createTopic(r *wire.CreateTopicRequest) error {
	if err := wire.CheckTopicName(r.Name); err != nil {
		return err
	}
	if r.Partitions < 1 || r.Partitions > wire.MaxPartitions {
		return wire.NewError(wire.CodeInvalidConfig, fmt.Sprintf("partitions %d out of range [1, %d]", r.Partitions, wire.MaxPartitions))
	}
	opts := b.resolveOptions(r.Options)
	if _, err := b.logOptions(opts); err != nil {
		return err
	}
	if b.cl != nil {
		return b.createClusterTopic(r.Name, int(r.Partitions), opts)
	}
	b.createMu.Lock() // one create at a time; lookups go on under mu
	defer b.createMu.Unlock()
	b.mu.RLock()
	existing, nparts := b.mu.topics[r.Name], b.mu.partitions
	b.mu.RUnlock()
	if existing != nil {
		if existing.meta.Partitions == int(r.Partitions) && existing.meta.Options == opts {
			return nil
		}
		return wire.NewError(wire.CodeTopicExists, fmt.Sprintf("topic %s exists with %d partitions", r.Name, existing.meta.Partitions))
	}
	if _, err := os.Stat(b.topicDir(r.Name)); err == nil {
		return wire.NewError(wire.CodeTopicExists, fmt.Sprintf(
			"the data directory holds a directory %s that is not a readable topic (skipped at start; see the log): move it away to create the topic", r.Name))
	}
	if limit := b.partitionLimit(); nparts+int(r.Partitions) > limit {
		return wire.NewError(wire.CodeInvalidConfig, fmt.Sprintf(
			"%d more partitions would exceed this broker's limit of %d (it has %d): each partition keeps files open, and the limit is half of ulimit -n",
			r.Partitions, limit, nparts))
	}
	m := topicMeta{Name: r.Name, Version: 1, Partitions: int(r.Partitions), Options: opts}
	if err := b.buildTopicDir(m); err != nil {
		return err
	}
	t := b.openTopic(m)
	for _, pt := range t.parts {
		if pt.offline != nil {
			// A new topic holds no data yet: give the whole creation up.
			closeTopic(t)
			if rerr := b.removeTopicDir(m.Name); rerr != nil {
				b.cfg.Logger.Error("cannot remove a failed creation", "topic", m.Name, "err", rerr)
			}
			return storageError(fmt.Errorf("cannot create topic %s: %w", m.Name, pt.offline))
		}
	}
	b.mu.Lock()
	b.addTopicLocked(t)
	b.mu.Unlock()
	b.cfg.Logger.Info("created topic", "topic", r.Name, "partitions", r.Partitions)
	return nil
}

// buildTopicDir writes a new topic's directory under a temporary name (topic.json and an
// empty directory per partition, all synced) and renames it into place.
func (b *Broker) buildTopicDir(m topicMeta) (err error) {
	fs := b.cfg.Log.FS
	tmp := filepath.Join(b.cfg.DataDir, fmt.Sprintf("%s%s.%d", creatingPrefix, m.Name, b.newSession()))
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
			err = storageError(fmt.Errorf("cannot create topic %s: %w", m.Name, err))
		}
	}()
	if err := fs.MkdirAll(tmp); err != nil {
		return err
	}
	for i := range m.Partitions {
		if err := fs.MkdirAll(filepath.Join(tmp, fmt.Sprint(i))); err != nil {
			return err
		}
	}
	raw, _ := json.MarshalIndent(m, "", "  ")
	if err := vfs.WriteFile(fs, tmp, filepath.Join(tmp, metaFile), raw, true); err != nil {
		return err
	}
	if err := fs.Rename(tmp, b.topicDir(m.Name)); err != nil {
		return err
	}
	return fs.SyncDir(b.cfg.DataDir)
}

// removeTopicDir removes a topic directory that never served, by renaming it to a
// creation leftover first (so a crash midway is cleaned at the next start).
func (b *Broker) removeTopicDir(name string) error {
	tmp := filepath.Join(b.cfg.DataDir, fmt.Sprintf("%s%s.%d", creatingPrefix, name, b.newSession()))
	if err := os.Rename(b.topicDir(name), tmp); err != nil {
		return err
	}
	return os.RemoveAll(tmp)
}

// lookup finds a partition; safe from any goroutine.
func (b *Broker) lookup(name []byte, id uint32) (*part, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	t := b.mu.topics[string(name)]
	if t == nil {
		return nil, wire.NewError(wire.CodeUnknownTopic, fmt.Sprintf("unknown topic %q", name))
	}
	if int(id) >= len(t.parts) {
		return nil, wire.NewError(wire.CodeUnknownPartition, fmt.Sprintf("topic %s has %d partitions, not %d", t.meta.Name, len(t.parts), id+1))
	}
	return t.parts[id], nil // swapped under the write lock (distributed mode)
}

// metadata answers a metadata request. A request for every topic lists those visible
// allows (all of them when it is nil); named topics were authorized before (admit).
func (b *Broker) metadata(r *wire.MetadataRequest, visible func(name string) bool) *wire.MetadataResponse {
	b.mu.RLock()
	names := r.Topics
	if len(names) == 0 {
		for name := range b.mu.topics {
			if visible == nil || visible(name) {
				names = append(names, name)
			}
		}
		sort.Strings(names)
	}
	var topics []*topic
	for _, name := range names {
		if t := b.mu.topics[name]; t != nil {
			topics = append(topics, t)
		}
	}
	b.mu.RUnlock()
	resp := &wire.MetadataResponse{}
	for _, t := range topics {
		b.mu.RLock()
		v, n := t.meta.Version, t.meta.Partitions
		b.mu.RUnlock()
		resp.Topics = append(resp.Topics, wire.Topic{Name: t.meta.Name, Version: v, Partitions: b.partitionsOf(t.meta.Name, n)})
	}
	return resp
}

// partitionsOf lists the n partitions of a topic with the address of the broker serving
// each: this one, or in distributed mode the one each is assigned to ("" while none is).
// Not under b.mu: it takes the cluster's lock, which comes before b.mu.
func (b *Broker) partitionsOf(name string, n int) []wire.Partition {
	parts := wire.NewPartitions(n, b.Addr())
	if b.cl != nil {
		for i := range parts {
			parts[i].Addr = b.cl.addrOf(admin.PartitionID{Topic: name, ID: i})
		}
	}
	return parts
}

// describe answers a describe request; the partitions' windows are read without a lock.
func (b *Broker) describe(name string) (*wire.DescribeTopicResponse, error) {
	b.mu.RLock()
	t := b.mu.topics[name]
	b.mu.RUnlock()
	if t == nil {
		return nil, wire.NewError(wire.CodeUnknownTopic, "unknown topic "+name)
	}
	b.mu.RLock()
	v, n := t.meta.Version, t.meta.Partitions
	b.mu.RUnlock()
	parts := b.partitionsOf(name, n) // before b.mu: see partitionsOf
	b.mu.RLock()
	defer b.mu.RUnlock()
	resp := &wire.DescribeTopicResponse{Name: name, Version: v, Options: t.meta.Options}
	for i, p := range parts {
		st := wire.PartitionState{Partition: p, Checkpoint: -1}
		if pt := t.parts[i]; pt.p != nil {
			w := pt.p.Window()
			st.LogStartOffset, st.NextOffset, st.Checkpoint, st.Session = w.Start, w.Next, w.Checkpoint, w.Session
		}
		resp.Partitions = append(resp.Partitions, st)
	}
	return resp, nil
}
