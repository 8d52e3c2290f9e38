package broker

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"sluice/engine"
	"sluice/persist/local"
	"sluice/persist/vfs"
	"sluice/sched"
	"sluice/wire"
)

// metaFile is the file in a topic's directory that records its version and options.
const metaFile = "topic.json"

// topicMeta is what is stored about a topic.
type topicMeta struct {
	Name       string            `json:"name"`
	Version    uint32            `json:"version"`
	Partitions int               `json:"partitions"`
	Options    wire.TopicOptions `json:"options"`
}

// topic is a loaded topic; parts never changes after load (expansion is milestone 2).
type topic struct {
	meta  topicMeta
	parts []*part
}

// part is a physical partition and its shard. Everything but the immutable fields is
// touched only on the shard goroutine.
type part struct {
	topic *topic
	id    int
	shard *sched.Shard
	p     *engine.Partition

	fetchWaiters []*fetchTask // parked long polls, oldest first
	ackWaiters   []*produceTask
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

// logOptions returns the segment log options of a topic's partitions.
func (b *Broker) logOptions(o wire.TopicOptions) local.Options {
	opts := b.cfg.Log
	opts.SegmentBytes = o.SegmentBytes
	opts.SegmentAge = time.Duration(o.SegmentMs) * time.Millisecond
	if o.SegmentMs < 0 {
		opts.SegmentAge = 100 * 365 * 24 * time.Hour
	}
	opts.RetentionBytes, opts.RetentionAge = max(o.RetentionBytes, 0), 0
	if o.RetentionMs > 0 {
		opts.RetentionAge = time.Duration(o.RetentionMs) * time.Millisecond
	}
	return opts
}

// loadTopics opens every topic found in the data directory.
func (b *Broker) loadTopics() error {
	ents, err := os.ReadDir(b.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("cannot list data directory %s: %w", b.cfg.DataDir, err)
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(b.cfg.DataDir, e.Name(), metaFile))
		if os.IsNotExist(err) {
			return fmt.Errorf("directory %s in the data directory is not a topic (no %s)", e.Name(), metaFile)
		}
		if err != nil {
			return fmt.Errorf("cannot read topic %s: %w", e.Name(), err)
		}
		var m topicMeta
		if err := json.Unmarshal(raw, &m); err != nil || m.Name != e.Name() || m.Partitions < 1 {
			return fmt.Errorf("cannot read topic %s: bad %s (%v)", e.Name(), metaFile, err)
		}
		t, err := b.openTopic(m)
		if err != nil {
			return err
		}
		b.mu.Lock()
		b.addTopicLocked(t)
		b.mu.Unlock()
	}
	return nil
}

// openTopic opens (creating if needed) every partition of a topic and places each on a
// shard.
func (b *Broker) openTopic(m topicMeta) (*topic, error) {
	t := &topic{meta: m}
	opts := b.logOptions(m.Options)
	for i := range m.Partitions {
		l, err := local.Open(filepath.Join(b.topicDir(m.Name), fmt.Sprint(i)), opts)
		if err != nil {
			b.closeParts(t.parts)
			return nil, fmt.Errorf("cannot open partition %s/%d: %w", m.Name, i, err)
		}
		p, err := engine.OpenPartition(engine.PartitionConfig{Topic: m.Name, ID: i, Version: m.Version,
			Session: b.newSession()}, l, b.arena)
		if err != nil {
			l.Close()
			b.closeParts(t.parts)
			return nil, err
		}
		t.parts = append(t.parts, &part{topic: t, id: i, p: p, shard: b.sched.ShardFor(partitionKey(m.Name, i))})
	}
	return t, nil
}

func (b *Broker) closeParts(parts []*part) {
	for _, pt := range parts {
		pt.p.Close()
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

// partitionKey hashes a partition's identity for shard placement (FNV-1a).
func partitionKey(topic string, id int) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(topic); i++ {
		h = (h ^ uint64(topic[i])) * 1099511628211
	}
	return (h ^ uint64(id)) * 1099511628211
}

// createTopic creates and opens a topic. It is idempotent for an identical request.
func (b *Broker) createTopic(r *wire.CreateTopicRequest) error {
	if err := wire.CheckTopicName(r.Name); err != nil {
		return err
	}
	if r.Partitions < 1 || r.Partitions > wire.MaxPartitions {
		return wire.NewError(wire.CodeInvalidConfig, fmt.Sprintf("partitions %d out of range [1, %d]", r.Partitions, wire.MaxPartitions))
	}
	opts := b.resolveOptions(r.Options)
	if err := opts.Validate(); err != nil {
		return err
	}
	b.createMu.Lock() // one create at a time; lookups go on under mu
	defer b.createMu.Unlock()
	b.mu.RLock()
	existing := b.mu.topics[r.Name]
	b.mu.RUnlock()
	if existing != nil {
		if existing.meta.Partitions == int(r.Partitions) && existing.meta.Options == opts {
			return nil
		}
		return wire.NewError(wire.CodeTopicExists, fmt.Sprintf("topic %s exists with %d partitions", r.Name, existing.meta.Partitions))
	}
	m := topicMeta{Name: r.Name, Version: 1, Partitions: int(r.Partitions), Options: opts}
	raw, _ := json.MarshalIndent(m, "", "  ")
	dir := b.topicDir(r.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot create topic %s: %w", r.Name, err)
	}
	t, err := b.openTopic(m)
	if err != nil {
		return err
	}
	// The metadata file is written last: a topic directory without it is refused at
	// start, so a crash mid-create is visible, not half-loaded.
	if err := vfs.WriteFile(vfs.Default(), dir, filepath.Join(dir, metaFile), raw, true); err != nil {
		b.closeParts(t.parts)
		return fmt.Errorf("cannot create topic %s: %w", r.Name, err)
	}
	b.mu.Lock()
	b.addTopicLocked(t)
	b.mu.Unlock()
	b.cfg.Logger.Info("created topic", "topic", r.Name, "partitions", r.Partitions)
	return nil
}

// lookup finds a partition; safe from any goroutine.
func (b *Broker) lookup(name []byte, id uint32) (*part, error) {
	b.mu.RLock()
	t := b.mu.topics[string(name)]
	b.mu.RUnlock()
	if t == nil {
		return nil, wire.NewError(wire.CodeUnknownTopic, fmt.Sprintf("unknown topic %q", name))
	}
	if int(id) >= len(t.parts) {
		return nil, wire.NewError(wire.CodeUnknownPartition, fmt.Sprintf("topic %s has %d partitions, not %d", t.meta.Name, len(t.parts), id+1))
	}
	return t.parts[id], nil
}

// metadata answers a metadata request.
func (b *Broker) metadata(r *wire.MetadataRequest) *wire.MetadataResponse {
	b.mu.RLock()
	defer b.mu.RUnlock()
	names := r.Topics
	if len(names) == 0 {
		for name := range b.mu.topics {
			names = append(names, name)
		}
		sort.Strings(names)
	}
	resp := &wire.MetadataResponse{}
	for _, name := range names {
		if t := b.mu.topics[name]; t != nil {
			resp.Topics = append(resp.Topics, wire.Topic{Name: name, Version: t.meta.Version,
				Partitions: wire.NewPartitions(t.meta.Partitions, b.addr)})
		}
	}
	return resp
}
