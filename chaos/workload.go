package chaos

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"sluice/batch"
	"sluice/chaos/check"
	"sluice/client"
)

// writerKind is one shape of producer in the workload.
type writerKind struct {
	sync  bool      // ProduceSync per record, or Produce and a Flush/WaitPersisted per chunk
	ack   check.Ack // the level it asks for
	keyed bool      // records carry a key (routed by its hash) or none (sticky partition)
}

// writerKinds are cycled through by the writers: every combination of the contract's
// produce modes that the harness checks.
var writerKinds = []writerKind{
	{sync: false, ack: check.AckPersisted, keyed: true},
	{sync: true, ack: check.AckPersisted, keyed: false},
	{sync: false, ack: check.AckAccepted, keyed: false},
	{sync: true, ack: check.AckAccepted, keyed: true},
}

// opTimeout bounds one produce call, flush or wait: long enough to ride out a fault
// (a restart takes a second or two), short enough that a stuck producer is replaced.
const opTimeout = 30 * time.Second

// writer is one producer of the workload. Each incarnation is a new client.Producer
// with a new identity in the values (index<<32 | incarnation), so the checker's
// per-producer order holds per client producer.
type writer struct {
	index    int
	kind     writerKind
	rate     int
	size     int
	topic    string
	addrs    func() []string
	hist     *check.History
	prog     *progress
	seq      uint64
	codecs   []batch.Codec // Config.Codecs
	life     time.Duration // Config.ProducerLife
	codec    atomic.Uint32 // the current producer's codec (a batch.Codec)
	restarts atomic.Int64  // producers replaced after a failed call
	// sent counts the records handed to producers, by the producers' codec.
	sent  [batch.CodecLZ4 + 1]atomic.Int64
	log   func(format string, args ...any)
	clock *atomic.Int64 // how far the producers' clocks are off, ms (run.clock)
	// doing is the writer's activity now, since doingSince (Unix nanoseconds): a slow
	// heal's log line says what each writer was waiting for (run.slowHeal).
	doing      atomic.Int32
	doingSince atomic.Int64
}

// activity is what a writer is doing; set per chunk or per synchronous record, never per
// asynchronous record.
type activity int32

const (
	actStarting  activity = iota // creating its producer
	actProducing                 // handing a chunk's records to Produce
	actSync                      // in a ProduceSync
	actWaiting                   // in Flush or WaitPersisted
	actClosing                   // closing a replaced producer
	actPacing                    // sleeping until its next chunk
	actRetrying                  // sleeping after a failed NewProducer
)

var activityNames = [...]string{"creating a producer", "producing", "in ProduceSync", "waiting for its ack",
	"closing its producer", "pacing", "sleeping to retry NewProducer"}

func (a activity) String() string { return activityNames[a] }

// set records that the writer starts doing a.
func (w *writer) set(a activity) {
	w.doing.Store(int32(a))
	w.doingSince.Store(time.Now().UnixNano())
}

// state says what the writer is doing and for how long, as of now.
func (w *writer) state(now time.Time) string {
	d := time.Duration(now.UnixNano() - w.doingSince.Load())
	return fmt.Sprintf("writer %d (%s, %v) %s for %v", w.index, w.kind, batch.Codec(w.codec.Load()), activity(w.doing.Load()),
		d.Round(time.Millisecond))
}

// String names the kind as the progress lines do.
func (k writerKind) String() string {
	s := "async"
	if k.sync {
		s = "sync"
	}
	s += " " + map[check.Ack]string{check.AckPersisted: "persisted", check.AckAccepted: "accepted"}[k.ack]
	if k.keyed {
		s += " keyed"
	}
	return s
}

// run produces until ctx ends, replacing its producer whenever a call fails and after
// its life (Config.ProducerLife).
func (w *writer) run(ctx context.Context) {
	for inc := uint64(1); ctx.Err() == nil; inc++ {
		w.set(actStarting)
		codec := w.codecs[(uint64(w.index)+inc)%uint64(len(w.codecs))]
		w.codec.Store(uint32(codec))
		p, err := client.NewProducer(ctx, w.topic, client.Brokers(w.addrs()...), client.Linger(2*time.Millisecond),
			client.RetryBackoff(10*time.Millisecond, 500*time.Millisecond), client.Compression(codec))
		if err != nil {
			w.set(actRetrying)
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		pending, err := w.produce(ctx, p, uint64(w.index)<<32|inc)
		if err != nil && ctx.Err() == nil {
			w.restarts.Add(1)
			w.log("writer %d: producer %d (%v) replaced: %v", w.index, inc, codec, err)
		}
		w.set(actClosing)
		cctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		if err := p.Close(cctx); err == nil { // Close persisted every record it held
			w.mark(pending, check.AckPersisted)
		}
		cancel()
	}
}

// produce writes chunks of records with p until ctx ends, a call fails or the producer's
// life has passed, and returns the records not yet known to be persisted.
func (w *writer) produce(ctx context.Context, p *client.Producer, pid uint64) ([]check.ID, error) {
	const tick = 100 * time.Millisecond
	chunk := max(1, w.rate/10)
	var pending []check.ID
	next := time.Now()
	end := next.Add(w.life)
	for ctx.Err() == nil && (w.life < 0 || time.Now().Before(end)) {
		ids, err := w.chunk(ctx, p, pid, chunk)
		w.sent[w.codec.Load()].Add(int64(len(ids)))
		pending = append(pending, ids...)
		if err != nil {
			return pending, err
		}
		if w.kind.ack == check.AckPersisted {
			pending = pending[:0]
		}
		next = next.Add(tick)
		w.set(actPacing)
		sleep(ctx, time.Until(next))
	}
	return pending, nil
}

// chunk produces n records and waits for the writer's ack level, recording each
// outcome. It returns the records it produced.
func (w *writer) chunk(ctx context.Context, p *client.Producer, pid uint64, n int) ([]check.ID, error) {
	ids := make([]check.ID, 0, n)
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if !w.kind.sync {
		w.set(actProducing)
	}
	for range n {
		id := check.ID{Producer: pid, Seq: w.seq}
		w.seq++
		r := &client.Record{Value: check.AppendValue(nil, id, w.size)}
		if off := w.clock.Load(); off != 0 { // a producer host whose clock jumped
			r.Timestamp = time.Now().UnixMilli() + off
		}
		if w.kind.keyed {
			r.Key = []byte(strconv.FormatUint(id.Seq%17, 10))
		}
		w.hist.Sent(id, check.AckUnknown)
		ids = append(ids, id)
		if !w.kind.sync {
			if err := p.Produce(octx, r); err != nil {
				return ids, fmt.Errorf("cannot produce %v: %w", id, err)
			}
			continue
		}
		level := client.AckAccepted
		if w.kind.ack == check.AckPersisted {
			level = client.AckPersisted
		}
		// A synchronous record gets the whole opTimeout to itself: waiting for each
		// record to persist, a chunk of them can outlast one deadline through two HDFS
		// outages in a row without any record stuck (seed 3002, distributed, replaced
		// its producer every time before).
		rctx, rcancel := context.WithTimeout(ctx, opTimeout)
		w.set(actSync)
		res, err := p.ProduceSync(rctx, r, level)
		rcancel()
		if err != nil {
			return ids, fmt.Errorf("cannot produce %v: %w", id, err)
		}
		if res.Offset >= 0 {
			w.hist.Placed(id, res.Partition, res.Offset)
		}
		w.mark([]check.ID{id}, w.kind.ack)
	}
	if w.kind.sync {
		return ids, nil
	}
	wait := p.Flush
	if w.kind.ack == check.AckPersisted {
		wait = p.WaitPersisted
	}
	w.set(actWaiting)
	if err := wait(octx); err != nil {
		return ids, fmt.Errorf("cannot wait for %v: %w", w.kind.ack, err)
	}
	w.mark(ids, w.kind.ack)
	return ids, nil
}

func (w *writer) mark(ids []check.ID, a check.Ack) {
	for _, id := range ids {
		w.hist.Sent(id, a)
	}
	if a == check.AckPersisted && len(ids) > 0 {
		w.prog.persisted()
	}
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
