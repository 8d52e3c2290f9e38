package engine

import (
	"fmt"
	"sync/atomic"

	"sluice/batch"
	"sluice/memarena"
	"sluice/persist/local"
)

// Partition is one physical partition: its write buffer in the arena, its segment log,
// the write window and the producers' sequences. See the package comment for the
// concurrency rules.
type Partition struct {
	topic   string
	id      int
	version uint32 // V: the topic version this partition serves
	session uint64 // S: set when the partition is loaded

	log   *local.Log
	arena *memarena.Arena
	buf   *memarena.WriteBuffer

	producers map[int64]*producerState
	durable   int64 // checkpoint last passed to the write buffer

	// Read from any goroutine by metrics.
	hits, misses atomic.Uint64
}

// PartitionConfig says where a partition lives and how it is identified.
type PartitionConfig struct {
	Topic   string
	ID      int
	Version uint32
	// Session is the S of this load; it must differ from every earlier load of the
	// partition (the loader passes a clock reading or an epoch).
	Session uint64
	// DedupHorizon bounds how many bytes at the end of the log are read, when loading, to
	// rebuild the producers' sequences. 0 means 64 MiB.
	DedupHorizon int64
}

// OpenPartition loads a partition over an open log: it rebuilds producer state from the
// log's tail and starts an empty write buffer at the log's end.
func OpenPartition(cfg PartitionConfig, log *local.Log, arena *memarena.Arena) (*Partition, error) {
	p := &Partition{topic: cfg.Topic, id: cfg.ID, version: cfg.Version, session: cfg.Session,
		log: log, arena: arena, producers: map[int64]*producerState{}}
	if err := p.rebuildProducers(cfg.DedupHorizon); err != nil {
		return nil, fmt.Errorf("cannot load partition %s/%d: %w", cfg.Topic, cfg.ID, err)
	}
	buf, err := arena.NewWriteBuffer(log.Next())
	if err != nil {
		return nil, fmt.Errorf("cannot load partition %s/%d: %w", cfg.Topic, cfg.ID, err)
	}
	p.buf = buf
	p.durable = log.Durable()
	buf.SetDurable(p.durable)
	return p, nil
}

// rebuildProducers reads batch headers from the last horizon bytes of the log (whole
// segments at least back to the active one) and records every idempotent batch.
func (p *Partition) rebuildProducers(horizon int64) error {
	if horizon == 0 {
		horizon = 64 << 20
	}
	st, err := p.log.Stats()
	if err != nil {
		return err
	}
	from := st.Start
	if st.Bytes > horizon && st.Next > st.Start {
		// Offsets are not bytes; estimate the start from the average batch density.
		from = st.Next - int64(float64(st.Next-st.Start)*float64(horizon)/float64(st.Bytes))
	}
	return p.log.WalkHeaders(from, func(h batch.Header) bool {
		p.remember(&h, h.BaseOffset, h.LastOffset())
		return true
	})
}

func (p *Partition) remember(h *batch.Header, base, last int64) {
	if !idempotent(h) {
		return
	}
	s := p.producers[h.ProducerID]
	if s == nil {
		s = &producerState{}
		p.producers[h.ProducerID] = s
	}
	s.add(appended{firstSeq: h.BaseSequence, lastSeq: h.BaseSequence + int32(h.Count) - 1, base: base, last: last})
}

// Window is the partition's (V, S, C) plus its end, as answers report it.
type Window struct {
	Version    uint32
	Session    uint64
	Checkpoint int64 // durable checkpoint C
	Next       int64 // high watermark: the offset the next batch gets
	Start      int64 // first offset held
}

// Window returns the current (V, S, C) and offsets.
func (p *Partition) Window() Window {
	return Window{Version: p.version, Session: p.session, Checkpoint: p.log.Durable(),
		Next: p.log.Next(), Start: p.log.Start()}
}

// CheckWindow verifies a request's V and S (S = 0: the client's first request, which
// learns S from the answer).
func (p *Partition) CheckWindow(v uint32, s uint64) error {
	var err error
	switch {
	case v != p.version:
		err = ErrVersionMismatch
	case s != 0 && s != p.session:
		err = ErrSessionMismatch
	default:
		return nil
	}
	w := p.Window()
	return &WindowError{Err: err, Version: w.Version, Session: w.Session, Checkpoint: w.Checkpoint}
}

// Log returns the partition's segment log (for the driver's fsync and retention work).
func (p *Partition) Log() *local.Log { return p.log }

// Close frees the write buffer and closes the log (fsyncing it unless the policy is never).
func (p *Partition) Close() error {
	p.buf.Close()
	return p.log.Close()
}

// Counters returns the read hits (served from memory) and misses (from the log). Safe
// from any goroutine.
func (p *Partition) Counters() (hits, misses uint64) { return p.hits.Load(), p.misses.Load() }
