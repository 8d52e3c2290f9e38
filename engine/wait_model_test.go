package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"sluice/batch"
	"sluice/memarena"
	"sluice/persist/local"
)

// waitReq is a test request that can park: the driver's request types embed Wait the
// same way.
type waitReq struct {
	Wait
	id     int
	kind   WaitKind
	target int64
}

// refWait is the reference model's view of one parked request.
type refWait struct {
	kind     WaitKind
	target   int64
	deadline int64
}

// woken is one answer the driver would give: which request, and why.
type woken struct {
	id  int
	why WakeReason
}

// TestWaitModel drives partitions with random produces (new batches, resends, and
// requests mixing a resend with a new batch), long-poll fetches, durable produces,
// persister passes, clock steps and early releases, and checks after every step that the
// requests the partition reports ready are exactly those a simple reference wakes, for
// the same reasons; that NextDeadline is the earliest parked deadline; and that a fetch
// woken by data finds data.
func TestWaitModel(t *testing.T) {
	steps := 20000
	if testing.Short() {
		steps = 3000
	}
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runWaitModel(t, seed, steps) })
	}
}

func runWaitModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 99))
	a := newArena(t, 64<<20, 16<<10)
	// C moves only at the test's persister passes.
	opts := local.Options{Sync: local.SyncGroup, SegmentBytes: 64 << 10}
	p := openPartition(t, t.TempDir(), a, opts, 1)
	defer p.Close()

	reqs := map[int]*waitReq{}
	ref := map[int]refWait{} // parked, per the reference
	var now int64
	nextID := 0
	seq := int32(0)    // the idempotent producer's next sequence
	var sent [][]byte  // the producer's batches, for resends
	var ready []Waiter // reused
	var spans []memarena.Span
	for step := range steps {
		var want []woken // what the reference wakes in this step
		wakeAll := func(kind WaitKind, why WakeReason, cond func(refWait) bool) {
			for id, r := range ref {
				if r.kind == kind && cond(r) {
					want = append(want, woken{id, why})
					delete(ref, id)
				}
			}
		}
		w := p.Window()
		switch op := rng.IntN(20); {
		case op < 6: // produce: new, a resend, or a resend followed by a new batch
			var req []byte
			appends := true
			switch {
			case len(sent) > 0 && op == 0:
				req, appends = sent[rng.IntN(len(sent))], false
			case len(sent) > 0 && op == 1:
				nb := mkBatch(7, seq, 1+rng.IntN(3), 40)
				req = append(append([]byte(nil), sent[len(sent)-1]...), nb...)
				sent, seq = append(sent, nb), seq+int32(countOf(nb))
			default:
				nb := mkBatch(7, seq, 1+rng.IntN(3), 40)
				req, sent, seq = nb, append(sent, nb), seq+int32(countOf(nb))
			}
			res, err := p.Produce(1, 1, req, testNow)
			if err != nil {
				t.Fatalf("step %d: produce: %v", step, err)
			}
			if (res.Appended > 0) != appends {
				t.Fatalf("step %d: appended %d batches, reference says %v", step, res.Appended, appends)
			}
			if n := len(refFetches(ref)); p.FetchesParked() != (n > 0) {
				t.Fatalf("step %d: FetchesParked %v with %d parked", step, p.FetchesParked(), n)
			}
			if res.Appended > 0 && p.FetchesParked() { // what the driver does
				p.DataArrived()
			}
			if appends {
				wakeAll(WaitFetch, WokeData, func(refWait) bool { return true })
			}
			// Appends never move C: only the persister's writes do.
			if c := p.Window().Checkpoint; c != w.Checkpoint {
				t.Fatalf("step %d: checkpoint moved from %d to %d on a produce", step, w.Checkpoint, c)
			}
		case op < 10: // a long poll at the end, or somewhere below it (answered now)
			off := w.Next
			if w.Next > 0 && rng.IntN(4) == 0 {
				off = rng.Int64N(w.Next)
			}
			r := &waitReq{id: nextID, kind: WaitFetch, target: off}
			nextID++
			deadline := now + 1 + rng.Int64N(100)
			parked := p.ParkFetch(r, off, deadline)
			if parked != (off == w.Next) {
				t.Fatalf("step %d: fetch at %d (next %d) parked=%v", step, off, w.Next, parked)
			}
			if parked {
				reqs[r.id], ref[r.id] = r, refWait{WaitFetch, off, deadline}
			}
		case op < 13: // a produce waiting for C to reach some offset
			target := w.Checkpoint + rng.Int64N(w.Next-w.Checkpoint+1) - 1
			r := &waitReq{id: nextID, kind: WaitDurable, target: target}
			nextID++
			deadline := now + 1 + rng.Int64N(100)
			parked := p.ParkDurable(r, target, deadline)
			if parked != (target > w.Checkpoint) {
				t.Fatalf("step %d: durable wait for %d (C %d) parked=%v", step, target, w.Checkpoint, parked)
			}
			if parked {
				reqs[r.id], ref[r.id] = r, refWait{WaitDurable, target, deadline}
			}
		case op < 15: // a persister pass, then the owner takes C
			persistNow(t, p)
			c := p.Window().Checkpoint
			if c != w.Next-1 {
				t.Fatalf("step %d: checkpoint %d after a sync, want %d", step, c, w.Next-1)
			}
			wakeAll(WaitDurable, WokeData, func(r refWait) bool { return r.target <= c })
		case op < 18: // the clock moves
			now += rng.Int64N(40)
			p.Expire(now)
			wakeAll(WaitFetch, WokeDeadline, func(r refWait) bool { return r.deadline <= now })
			wakeAll(WaitDurable, WokeDeadline, func(r refWait) bool { return r.deadline <= now })
		default: // the network layer releases a parked request, or one that is not parked
			id := rng.IntN(nextID + 1)
			r, ok := reqs[id]
			if !ok {
				r = &waitReq{id: -1}
			}
			_, parked := ref[id]
			if got := p.Release(r); got != parked {
				t.Fatalf("step %d: release of %d reported %v, want %v", step, id, got, parked)
			}
			if parked {
				want = append(want, woken{id, WokeRelease})
				delete(ref, id)
			}
		}
		ready = p.Ready(ready[:0])
		spans = checkWoken(t, step, p, ready, want, spans)
		checkParked(t, step, p, ref)
	}
	// Shutdown wakes everything left.
	var want []woken
	for id := range ref {
		want = append(want, woken{id, WokeShutdown})
	}
	if err := p.Shutdown(); err != nil {
		t.Fatal(err)
	}
	checkWoken(t, steps, p, p.Ready(nil), want, nil)
	if r := (&waitReq{}); p.ParkFetch(r, p.Window().Next, now+10) {
		t.Fatal("a fetch parked on a partition shutting down")
	}
}

// refFetches returns the ids of the fetches parked in the reference.
func refFetches(ref map[int]refWait) []int {
	var ids []int
	for id, r := range ref {
		if r.kind == WaitFetch {
			ids = append(ids, id)
		}
	}
	return ids
}

// checkWoken compares the requests the partition woke with the reference's, and checks
// that a fetch woken by data finds data.
func checkWoken(t *testing.T, step int, p *Partition, ready []Waiter, want []woken, spans []memarena.Span) []memarena.Span {
	t.Helper()
	got := make([]woken, 0, len(ready))
	for _, w := range ready {
		r := w.(*waitReq)
		if r.Parked() {
			t.Fatalf("step %d: request %d is ready and still parked", step, r.id)
		}
		got = append(got, woken{r.id, r.Wake()})
		if r.Wake() == WokeData && r.kind == WaitFetch {
			res, err := p.Fetch(r.target, 1<<10, spans)
			if err != nil || res.Len() == 0 {
				t.Fatalf("step %d: fetch %d woken by data finds none at %d (%v)", step, r.id, r.target, err)
			}
			res.Release()
			spans = res.Spans[:0]
		}
	}
	cmp := func(a, b woken) int { return a.id - b.id }
	slices.SortFunc(got, cmp)
	slices.SortFunc(want, cmp)
	if !slices.Equal(got, want) {
		t.Fatalf("step %d: woke %v, reference woke %v", step, got, want)
	}
	return spans
}

// checkParked compares the counts and the earliest deadline with the reference.
func checkParked(t *testing.T, step int, p *Partition, ref map[int]refWait) {
	t.Helper()
	var fetches, durables int
	earliest, any := int64(0), false
	for _, r := range ref {
		if r.kind == WaitFetch {
			fetches++
		} else {
			durables++
		}
		if !any || r.deadline < earliest {
			earliest, any = r.deadline, true
		}
	}
	f, d := p.Parked()
	if f != fetches || d != durables {
		t.Fatalf("step %d: parked %d fetches, %d durable; reference %d, %d", step, f, d, fetches, durables)
	}
	if got, ok := p.NextDeadline(); ok != any || got != earliest {
		t.Fatalf("step %d: next deadline %d (%v), reference %d (%v)", step, got, ok, earliest, any)
	}
}

// countOf returns the record count of an encoded batch.
func countOf(b []byte) int {
	h, err := batch.ParseHeader(b)
	if err != nil {
		panic(err)
	}
	return int(h.Count)
}
