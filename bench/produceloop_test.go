package bench

import (
	"context"
	"testing"
	"time"
)

// recordingProducer keeps the stamps of what it is sent. It stands in for a system's
// client to test the harness's own loop (how it stamps, counts and hands over records),
// which the integration tests run against real servers only as a whole.
type recordingProducer struct {
	acks    bool
	stamps  []int64
	sizes   []int
	chunks  []int // SendBatch's call sizes
	pending []func(error)
}

func (p *recordingProducer) Send(_ context.Context, v []byte, ack func(error)) error {
	p.stamps, p.sizes = append(p.stamps, stampOf(v)), append(p.sizes, len(v))
	if p.acks {
		p.pending = append(p.pending, ack)
	}
	return nil
}
func (p *recordingProducer) Acks() bool                  { return p.acks }
func (p *recordingProducer) Flush(context.Context) error { return nil }
func (p *recordingProducer) Close() error                { return nil }

// batchingProducer is a recordingProducer that takes several records at once.
type batchingProducer struct{ recordingProducer }

func (p *batchingProducer) SendBatch(ctx context.Context, vs [][]byte) (int, error) {
	p.chunks = append(p.chunks, len(vs))
	for _, v := range vs {
		_ = p.Send(ctx, v, nil)
	}
	return len(vs), nil
}

// TestProduceLoopChunks: paced at a rate that releases several records per wake-up,
// produceLoop hands every record over once, in order of its intended time, each of the
// record size, counted; a driver that takes batches gets chunks of at most 16 records of
// 1 KiB (chunkBytes), one that reports acknowledgments gets a callback per record, which
// records the record's latency.
func TestProduceLoopChunks(t *testing.T) {
	const quota = 3000
	for _, tc := range []struct {
		name string
		p    interface {
			Producer
			rec() *recordingProducer
		}
	}{
		{"batches", &batchingProducer{}},
		{"records", &recordingProducer{}},
		{"acknowledged", &recordingProducer{acks: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Config{RecordSize: 1024}
			var cnt Counters
			rec := NewRecorder()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			produceLoop(ctx, tc.p, c, newClock(), 200_000, quota, &cnt, rec)
			r := tc.p.rec()
			if len(r.stamps) != quota || cnt.records.Load() != quota || cnt.bytes.Load() != quota*1024 {
				t.Fatalf("sent %d records, counted %d (%d bytes); want %d", len(r.stamps), cnt.records.Load(), cnt.bytes.Load(), quota)
			}
			for i, s := range r.stamps {
				if r.sizes[i] != 1024 || i > 0 && s <= r.stamps[i-1] {
					t.Fatalf("record %d: %d bytes, stamp %d after %d", i, r.sizes[i], s, r.stamps[max(i-1, 0)])
				}
			}
			_, batching := tc.p.(BatchSender)
			switch {
			case batching && len(r.chunks) == 0:
				t.Fatal("a driver that takes batches was sent records one by one")
			case !batching && len(r.chunks) > 0:
				t.Fatal("a driver without SendBatch got batches")
			}
			many := 0
			for _, n := range r.chunks {
				if n < 1 || n > 16 {
					t.Fatalf("a chunk of %d records", n)
				}
				if n > 1 {
					many++
				}
			}
			if batching && many == 0 {
				t.Fatalf("200 000 records/s came in chunks of one: %v", r.chunks)
			}
			if tc.name == "acknowledged" {
				if len(r.pending) != quota {
					t.Fatalf("%d callbacks for %d records", len(r.pending), quota)
				}
				for _, ack := range r.pending {
					ack(nil)
				}
				if got := rec.Summary(true); got == nil || got.Count != quota {
					t.Fatalf("latencies recorded from the callbacks: %+v", got)
				}
			}
		})
	}
}

func (p *recordingProducer) rec() *recordingProducer { return p }
