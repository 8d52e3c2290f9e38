package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"sluice/batch"
	"sluice/memarena"
	"sluice/persist/local"
)

func newArena(t testing.TB, size, chunk int64) *memarena.Arena {
	t.Helper()
	cfg := memarena.Config{Size: size, ChunkSize: chunk}
	cfg.EnsureDefaults()
	a, err := memarena.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// openPartition opens a partition as the broker does by default: checking the records
// of what is produced.
func openPartition(t testing.TB, dir string, a *memarena.Arena, opts local.Options, session uint64) *Partition {
	t.Helper()
	return openPartitionAt(t, dir, a, opts, session, NewRecordChecker())
}

// openPartitionAt opens a partition with the given record checker (nil: a broker that
// trusts its producers' records).
func openPartitionAt(t testing.TB, dir string, a *memarena.Arena, opts local.Options, session uint64, rc *RecordChecker) *Partition {
	t.Helper()
	l, err := local.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Open(PartitionConfig{Topic: "t", ID: 0, Version: 1, Session: session, Records: rc}, l, a)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// persistNow does what the driver's persister and then the owner do: sync the store and
// take the new checkpoint.
func persistNow(t testing.TB, p *Partition) {
	t.Helper()
	if _, err := p.Persist(); err != nil {
		t.Fatal(err)
	}
	p.Checkpointed()
}

// mkBatch builds a batch of n records whose values name the producer's sequence.
func mkBatch(pid int64, seq int32, n int, size int) []byte {
	var b batch.Builder
	b.Reset(nil, pid, seq)
	for i := range n {
		v := fmt.Appendf(nil, "p%d-s%d-", pid, int(seq)+i)
		v = append(v, bytes.Repeat([]byte{'.'}, max(0, size-len(v)))...)
		b.Add(uint16(i), 1_700_000_000_000+int64(seq)+int64(i), nil, v)
	}
	return b.Finish()
}

// readAll fetches [from, end) and returns the record values.
func readAll(t testing.TB, p *Partition, from int64) []string {
	t.Helper()
	var vals []string
	var spans []memarena.Span
	for off := from; off < p.Window().Next; {
		var data []byte
		data, spans = fetchBytes(t, p, off, 1<<16, spans)
		for len(data) > 0 {
			var it batch.Iter
			if err := it.Reset(data); err != nil {
				t.Fatalf("fetch at %d: %v", off, err)
			}
			h := it.Header()
			for it.Next() {
				if r := it.Record(); r.Offset >= off {
					vals = append(vals, string(bytes.TrimRight(r.Value, ".")))
				}
			}
			off = h.LastOffset() + 1
			data = data[h.Size():]
		}
	}
	return vals
}

// fetchBytes fetches from offset off of p and returns a copy of the answer's bytes, from
// memory or from the segment file, and spans to reuse for the next fetch.
func fetchBytes(t testing.TB, p *Partition, off int64, maxBytes int, spans []memarena.Span) ([]byte, []memarena.Span) {
	t.Helper()
	res, err := p.Fetch(off, maxBytes, spans)
	if err != nil {
		t.Fatalf("fetch at %d: %v", off, err)
	}
	defer res.Release()
	if len(res.Spans) == 0 {
		data := make([]byte, res.Region.Len)
		if _, err := res.Region.File.ReadAt(data, res.Region.Pos); err != nil {
			t.Fatal(err)
		}
		return data, res.Spans
	}
	var data []byte
	for i := range res.Spans {
		data = append(data, res.Spans[i].Bytes()...)
	}
	return data, res.Spans
}

func TestProduceFetchAndWindow(t *testing.T) {
	a := newArena(t, 8<<20, 64<<10)
	dir := t.TempDir()
	p := openPartition(t, dir, a, local.Options{Sync: local.SyncEveryBatch}, 77)
	// The first request (S = 0) is accepted and learns S.
	res, err := p.Produce(1, 0, mkBatch(5, 0, 3, 10), testNow)
	if err != nil || res.Base != 0 || res.Last != 2 || res.Session != 77 || res.Checkpoint != -1 {
		t.Fatalf("first produce: %+v %v", res, err)
	}
	// Accepted is not durable: C moves when the persister has written and synced it.
	persistNow(t, p)
	if c := p.Window().Checkpoint; c != 2 {
		t.Fatalf("checkpoint %d after the persister, want 2", c)
	}
	// Wrong V or S: rejected with the current window.
	for _, c := range []struct {
		v    uint32
		s    uint64
		want error
	}{{2, 77, ErrVersionMismatch}, {1, 78, ErrSessionMismatch}} {
		_, err := p.Produce(c.v, c.s, mkBatch(5, 3, 1, 10), testNow)
		var we *WindowError
		if !errors.Is(err, c.want) || !errors.As(err, &we) || we.Session != 77 || we.Checkpoint != 2 {
			t.Fatalf("V=%d S=%d: %v", c.v, c.s, err)
		}
	}
	// Two batches in one request, then an empty request.
	two := append(mkBatch(5, 3, 2, 10), mkBatch(5, 5, 1, 10)...)
	if res, err = p.Produce(1, 77, two, testNow); err != nil || res.Base != 3 || res.Last != 5 {
		t.Fatalf("two batches: %+v %v", res, err)
	}
	if res, err = p.Produce(1, 77, nil, testNow); err != nil || res.Next != 6 || res.Base != -1 {
		t.Fatalf("empty produce: %+v %v", res, err)
	}
	want := []string{"p5-s0-", "p5-s1-", "p5-s2-", "p5-s3-", "p5-s4-", "p5-s5-"}
	if got := readAll(t, p, 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %v", got)
	}
	if got := readAll(t, p, 4); fmt.Sprint(got) != fmt.Sprint(want[4:]) {
		t.Fatalf("read from 4: %v", got)
	}
	if hits, _ := p.Counters(); hits == 0 {
		t.Fatal("no reads were served from memory")
	}
}

func TestDedup(t *testing.T) {
	a := newArena(t, 8<<20, 64<<10)
	dir := t.TempDir()
	p := openPartition(t, dir, a, local.Options{}, 1)
	for seq := int32(0); seq < 30; seq += 3 {
		if _, err := p.Produce(1, 1, mkBatch(9, seq, 3, 10), testNow); err != nil {
			t.Fatal(err)
		}
	}
	check := func(p *Partition) {
		t.Helper()
		// A resend of a recent batch gets its first offsets back and appends nothing.
		res, err := p.Produce(1, 0, mkBatch(9, 24, 3, 10), testNow)
		if err != nil || res.Duplicates != 1 || res.Base != 24 || res.Last != 26 || res.Next != 30 {
			t.Fatalf("resend: %+v %v", res, err)
		}
		// A resend older than the window is acknowledged without offsets.
		if res, err = p.Produce(1, 0, mkBatch(9, 0, 3, 10), testNow); err != nil || res.Duplicates != 1 || res.Next != 30 {
			t.Fatalf("old resend: %+v %v", res, err)
		}
		// A gap is refused; so is an overlap that is not a resend.
		for _, seq := range []int32{31, 25} {
			if _, err := p.Produce(1, 0, mkBatch(9, seq, 3, 10), testNow); !errors.Is(err, ErrOutOfOrderSequence) {
				t.Fatalf("seq %d: %v", seq, err)
			}
		}
		// Producer id 0 is not deduplicated.
		if res, err = p.Produce(1, 0, mkBatch(0, 0, 1, 10), testNow); err != nil || res.Duplicates != 0 {
			t.Fatalf("non-idempotent: %+v %v", res, err)
		}
	}
	check(p)
	if err := p.Shutdown(); err != nil { // the last Persist: Close writes nothing
		t.Fatal(err)
	}
	p.Close()
	// Rebuilt from the log on load (new session).
	p = openPartition(t, dir, a, local.Options{}, 2)
	defer p.Close()
	next := p.Window().Next
	res, err := p.Produce(1, 0, mkBatch(9, 24, 3, 10), testNow)
	if err != nil || res.Duplicates != 1 || res.Base != 24 || res.Next != next {
		t.Fatalf("resend after reload: %+v %v", res, err)
	}
	if res, err = p.Produce(1, 0, mkBatch(9, 30, 2, 10), testNow); err != nil || res.Base != next {
		t.Fatalf("continue after reload: %+v %v", res, err)
	}
}

// TestSequenceDoesNotWrap: a producer's sequences end at 2^31-2. A batch that reaches
// 2^31-1 is refused, and does not leave its producer a wrapped sequence under which later
// batches, taken for old resends, would be acknowledged and dropped. A batch ending at
// 2^31-2 is taken, and a retry of the request that got there is acknowledged, as any
// retry is.
func TestSequenceDoesNotWrap(t *testing.T) {
	a := newArena(t, 8<<20, 64<<10)
	p := openPartition(t, t.TempDir(), a, local.Options{}, 1)
	defer p.Close()
	var req [][]byte // 9 batches, one more than the dedup window, up to the last sequence
	for i := range 9 {
		req = append(req, mkBatch(9, math.MaxInt32-9+int32(i), 1, 10))
	}
	last := bytes.Join(req, nil)
	if res, err := p.Produce(1, 1, last, testNow); err != nil || res.Appended != 9 {
		t.Fatalf("batches up to 2^31-2: %+v %v", res, err)
	}
	for name, b := range map[string][]byte{
		"the next batch":             mkBatch(9, math.MaxInt32, 1, 10),
		"a batch past the end":       mkBatch(9, math.MaxInt32-1, 3, 10),
		"a new producer's at 2^31-1": mkBatch(7, math.MaxInt32-2, 3, 10),
	} {
		if _, err := p.Produce(1, 0, b, testNow); !errors.Is(err, ErrInvalidBatch) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if res, err := p.Produce(1, 0, last, testNow); err != nil || res.Duplicates != 9 || res.Appended != 0 {
		t.Fatalf("a retry of the last request: %+v %v", res, err)
	}
	if p.Window().Next != 9 {
		t.Fatalf("the log ends at %d, want 9", p.Window().Next)
	}
	// The same after a switch to a newer layout version (drain): the oldest batch, older
	// than the window, is acknowledged; one that reaches the end is corrupt, not a
	// version mismatch (which would have the client route it again).
	p.Freeze()
	p.Switch(2, 0)
	if res, err := p.Produce(1, 0, req[0], testNow); err != nil || res.Duplicates != 1 {
		t.Fatalf("a drain of the oldest batch: %+v %v", res, err)
	}
	if _, err := p.Produce(1, 0, mkBatch(9, math.MaxInt32, 1, 10), testNow); !errors.Is(err, ErrInvalidBatch) {
		t.Fatalf("a drain of a batch at the end: %v", err)
	}
}

// TestSequenceExhaustedByAnOldLog: a producer state rebuilt from a log written before
// sequences stopped wrapping (a batch that wrapped below 0, or one ending at 2^31-1) has
// no new batch left: a low sequence is a client wrapping around, refused as a gap rather
// than acknowledged as an old resend and dropped.
func TestSequenceExhaustedByAnOldLog(t *testing.T) {
	for _, old := range []batch.Header{
		{ProducerID: 9, BaseSequence: math.MaxInt32 - 1, Count: 3}, // wrapped to -2^31
		{ProducerID: 9, BaseSequence: math.MaxInt32 - 1, Count: 2}, // ended at 2^31-1
	} {
		a := newArena(t, 8<<20, 64<<10)
		p := openPartition(t, t.TempDir(), a, local.Options{}, 1)
		if _, err := p.Produce(1, 0, mkBatch(9, math.MaxInt32-10, 5, 10), testNow); err != nil {
			t.Fatal(err)
		}
		p.app.Lock()
		p.remember(&old, 5, 7) // as the rebuild from such a log does
		p.app.Unlock()
		if res, err := p.Produce(1, 0, mkBatch(9, 1, 2, 10), testNow); !errors.Is(err, ErrOutOfOrderSequence) {
			t.Fatalf("after %+v, a low sequence: %+v %v", old, res, err)
		}
		if p.Window().Next != 5 {
			t.Fatalf("after %+v the log ends at %d, want 5", old, p.Window().Next)
		}
		p.Close()
	}
}

func TestInvalidBatchesAppendNothing(t *testing.T) {
	a := newArena(t, 8<<20, 64<<10)
	p := openPartition(t, t.TempDir(), a, local.Options{}, 1)
	defer p.Close()
	good := mkBatch(0, -1, 2, 10)
	bad := mkBatch(0, -1, 2, 10)
	bad[len(bad)-1] ^= 1
	for name, req := range map[string][]byte{
		"crc":       append(append([]byte(nil), good...), bad...),
		"truncated": append(append([]byte(nil), good...), good[:30]...),
		"garbage":   []byte("hello, world, this is not a batch at all, no no no no"),
	} {
		if _, err := p.Produce(1, 0, req, testNow); !errors.Is(err, ErrInvalidBatch) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if p.Window().Next != 0 {
		t.Fatal("an invalid request appended something")
	}
}

// TestThrottle fills a small arena with data that is not durable (fsync never runs: group
// sync with a long interval), sees the typed throttle, then lets the checkpoint advance.
func TestThrottle(t *testing.T) {
	a := newArena(t, 1<<20, 64<<10)
	p := openPartition(t, t.TempDir(), a, local.Options{Sync: local.SyncGroup, SyncInterval: 1 << 62, SyncBytes: 1 << 40}, 1)
	defer p.Close()
	b := mkBatch(0, -1, 16, 1000)
	var err error
	n := 0
	for ; n < 1000; n++ {
		if _, err = p.Produce(1, 0, b, testNow); err != nil {
			break
		}
	}
	if !errors.Is(err, memarena.ErrFull) {
		t.Fatalf("after %d batches: %v", n, err)
	}
	next := p.Window().Next
	if _, err := p.Produce(1, 0, b, testNow); !errors.Is(err, memarena.ErrFull) || p.Window().Next != next {
		t.Fatalf("throttled produce appended: %v", err)
	}
	persistNow(t, p)
	if _, err := p.Produce(1, 0, b, testNow); err != nil {
		t.Fatalf("after the checkpoint advanced: %v", err)
	}
	if got := readAll(t, p, 0); len(got) != (n+1)*16 {
		t.Fatalf("read %d records, want %d", len(got), (n+1)*16)
	}
}

// testNow is the clock the tests' produces pass (segments roll by age against it).
var testNow = time.Unix(1_700_000_000, 0)

// TestThrottleWithConcurrentPersister appends until the arena is full, over and over,
// while a persister goroutine runs Persist back to back (the broker's shape: appends on
// event loops, persists on their own goroutine), with segments small enough to roll
// every few batches. A persister that read how far the log was placed outside the
// append lock could see a batch that the append then took back (its copy refused by
// the full arena) and fail asking for bytes that never came (found by a hostile test
// on a throttled disk). Every Persist must succeed, the next offset readers see must
// never go back (a refused append places nothing), and every batch appended must come
// back.
func TestThrottleWithConcurrentPersister(t *testing.T) {
	a := newArena(t, 1<<20, 64<<10)
	p := openPartition(t, t.TempDir(), a, local.Options{Sync: local.SyncNever, SegmentBytes: 256 << 10}, 1)
	defer p.Close()
	stop := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		seen := int64(0)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := p.Persist(); err != nil {
				errs <- err
				return
			}
			// A refused append places nothing: the next offset readers see never goes back.
			next := p.Window().Next
			if next < seen {
				errs <- fmt.Errorf("the next offset went back from %d to %d", seen, next)
				return
			}
			seen = next
		}
	}()
	appended, full := 0, 0
	for i := 0; appended < 400; i++ {
		b := mkBatch(0, -1, 1+i%7, 9000+i%5*3000) // 9-69 KiB, so that a roll's first batch often meets a full arena
		_, err := p.Produce(1, 0, b, testNow)
		switch {
		case err == nil:
			appended += 1 + i%7
		case errors.Is(err, memarena.ErrFull):
			full++
			p.Checkpointed() // the owner's turn: what is durable becomes reclaimable
		default:
			t.Fatalf("produce: %v", err)
		}
		select {
		case err := <-errs:
			t.Fatalf("persist while appends met a full arena: %v", err)
		default:
		}
	}
	close(stop)
	if err := <-errs; err != nil {
		t.Fatalf("persist while appends met a full arena: %v", err)
	}
	persistNow(t, p)
	if full == 0 {
		t.Fatal("the arena was never full: the test did not test")
	}
	if got := readAll(t, p, 0); len(got) != appended {
		t.Fatalf("read %d records, want %d", len(got), appended)
	}
	t.Logf("%d records appended, %d appends refused by the full arena", appended, full)
}

// TestThrottleRefusesRequestWhole: a request of several batches that a full arena
// cannot take is refused before its first batch, so that "busy: nothing was appended"
// holds and a producer without an id may send it again. (The arena refused the batch
// that did not fit after the ones before it were appended: a review's log held a
// request's first batches six times after five busy answers.)
func TestThrottleRefusesRequestWhole(t *testing.T) {
	a := newArena(t, 1<<20, 64<<10)
	p := openPartition(t, t.TempDir(), a, local.Options{Sync: local.SyncGroup, SyncInterval: 1 << 62, SyncBytes: 1 << 40}, 1)
	defer p.Close()
	big := mkBatch(0, -1, 100, 1000)
	n := 0
	for ; ; n++ {
		if _, err := p.Produce(1, 0, big, testNow); err != nil {
			if !errors.Is(err, memarena.ErrFull) {
				t.Fatal(err)
			}
			break
		}
	}
	next := p.Window().Next
	// What the arena has left: less than big and its padding, more than a small batch
	// and its (else this test would not tell a prefix from nothing).
	cs := a.Stats().ChunkSize
	left := a.Stats().FreeBytes + (cs-p.buf.Stats().TailPos%cs)%cs // free chunks, and the tail chunk's room
	small := mkBatch(0, -1, 1, 10)
	if left < int64(len(small))+4095 {
		t.Fatalf("the arena has %d bytes left after %d batches: too few for this test's small batch", left, n)
	}
	res, err := p.Produce(1, 0, append(append([]byte(nil), small...), big...), testNow)
	if !errors.Is(err, memarena.ErrFull) || p.Window().Next != next || res.Base != -1 || res.Appended != 0 {
		t.Fatalf("a request the arena cannot take whole: %v, appended %d (base %d), next %d → %d", err, res.Appended, res.Base, next, p.Window().Next)
	}
	persistNow(t, p)
	if res, err := p.Produce(1, 0, append(append([]byte(nil), small...), big...), testNow); err != nil || res.Appended != 2 {
		t.Fatalf("after the checkpoint advanced: %v, appended %d", err, res.Appended)
	}
}
