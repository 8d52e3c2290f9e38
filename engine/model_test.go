package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"sluice/batch"
	"sluice/memarena"
	"sluice/persist/local"
)

// TestModel runs random produces, fetches and checkpoint advances over a thousand
// partitions sharing an arena far smaller than the data, and checks after every step:
// every fetch returns exactly the batches appended (from memory or from the log), data
// past a partition's checkpoint is always served from memory (never reclaimed), and the
// arena's pending bytes equal the model's.
func TestModel(t *testing.T) {
	const parts = 1000
	steps := 20000
	if testing.Short() {
		steps = 3000
	}
	a := newArena(t, 2<<20, 16<<10) // 2 MiB for ~40 MiB of data
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	// Group fsync that never fires by itself: checkpoints advance only by the test's Sync.
	opts := local.Options{Sync: local.SyncGroup, SyncInterval: 1 << 62, SyncBytes: 1 << 40, SegmentBytes: 64 << 10}
	ps := make([]*Partition, parts)
	model := make([][][]byte, parts) // appended batches per partition, as stored
	for i := range ps {
		ps[i] = openPartition(t, fmt.Sprintf("%s/%d", dir, i), a, opts, 1)
		defer ps[i].Close()
	}
	var spans []memarena.Span
	throttled := 0
	for step := range steps {
		i := rng.IntN(parts)
		if rng.IntN(10) == 0 { // hot partitions
			i = rng.IntN(5)
		}
		p := ps[i]
		switch op := rng.IntN(10); {
		case op < 5:
			b := mkBatch(0, -1, 1+rng.IntN(8), 50+rng.IntN(500))
			if _, err := p.Produce(1, 1, b, testNow); err != nil {
				if !errors.Is(err, memarena.ErrFull) {
					t.Fatalf("step %d: produce: %v", step, err)
				}
				throttled++
				continue
			}
			model[i] = append(model[i], b)
		case op < 8:
			if len(model[i]) == 0 {
				continue
			}
			k := rng.IntN(len(model[i]))
			off := batch.BaseOffset(model[i][k])
			spans = checkFetch(t, p, off, model[i][k:], spans)
		default:
			persistNow(t, p)
		}
		if step%500 == 0 {
			checkPending(t, a, ps, model)
		}
	}
	checkPending(t, a, ps, model)
	st := a.Stats()
	if st.ReclaimedBytes == 0 || throttled == 0 {
		t.Fatalf("the arena never came under pressure: reclaimed %d, throttled %d", st.ReclaimedBytes, throttled)
	}
	t.Logf("reclaimed %d bytes, %d throttled produces, hits %d misses %d", st.ReclaimedBytes, throttled, st.ReadHits, st.ReadMisses)
}

// checkFetch fetches from off and compares the batches with want (the model's batches
// from the one at off). Batches past the checkpoint must come from memory.
func checkFetch(t *testing.T, p *Partition, off int64, want [][]byte, spans []memarena.Span) []memarena.Span {
	t.Helper()
	res, err := p.Fetch(off, 4<<10, spans)
	if err != nil {
		t.Fatalf("fetch at %d: %v", off, err)
	}
	defer res.Release()
	var got []byte
	if len(res.Spans) > 0 {
		for i := range res.Spans {
			got = append(got, res.Spans[i].Bytes()...)
		}
	} else {
		if off > res.Checkpoint {
			t.Fatalf("offset %d past checkpoint %d was not in memory", off, res.Checkpoint)
		}
		got = make([]byte, res.Region.Len)
		if _, err := res.Region.File.ReadAt(got, res.Region.Pos); err != nil {
			t.Fatal(err)
		}
	}
	for len(got) > 0 {
		if len(want) == 0 || !bytes.HasPrefix(got, want[0]) {
			t.Fatalf("fetch at %d returned bytes that were not appended there", off)
		}
		got, want = got[len(want[0]):], want[1:]
	}
	return res.Spans[:0]
}

// checkPending compares the arena's not-yet-durable bytes with the model.
func checkPending(t *testing.T, a *memarena.Arena, ps []*Partition, model [][][]byte) {
	t.Helper()
	var pending int64
	for i, p := range ps {
		c := p.Window().Checkpoint
		for _, b := range model[i] {
			if batch.BaseOffset(b) > c {
				pending += int64(len(b))
			}
		}
	}
	if st := a.Stats(); st.PendingBytes != pending {
		t.Fatalf("arena pending bytes %d, model %d", st.PendingBytes, pending)
	}
}
