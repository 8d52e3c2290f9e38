package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"sluice/batch"
	"sluice/persist/vfs"
	"sluice/persist/vfs/errorfs"
)

func TestRoundTripAndReopen(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	if l.Start() != 0 || l.Next() != 0 || l.Durable() != -1 {
		t.Fatalf("new log: start %d next %d durable %d", l.Start(), l.Next(), l.Durable())
	}
	next := appendN(t, l, 200)
	checkContents(t, l)
	if l.Durable() != next-1 {
		t.Fatalf("durable %d after persist, want %d", l.Durable(), next-1)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, Options{})
	if l.Next() != next || l.Durable() != next-1 {
		t.Fatalf("reopened: next %d durable %d, want %d", l.Next(), l.Durable(), next)
	}
	checkContents(t, l)
	appendN(t, l, 10)
	checkContents(t, l)
}

// TestManySegments rolls through hundreds of segments and checks that every offset and
// every timestamp is found, before and after a reopen (which loads sealed indexes lazily).
func TestManySegments(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 4 << 10, IndexInterval: 512, Sync: SyncNever} // fsync is tested elsewhere; here it would only add minutes of waiting
	l := openLog(t, dir, opts)
	next := appendN(t, l, 6000)
	if s := stats(t, l); s.Segments < 200 {
		t.Fatalf("only %d segments", s.Segments)
	}
	check := func(l *Log) {
		t.Helper()
		checkContents(t, l)
		for o := int64(0); o < next; o++ {
			r, err := l.ReadRegion(o, 1)
			if err != nil {
				t.Fatalf("region at %d: %v", o, err)
			}
			if r.Offset > o || r.NextOffset <= o || r.Len <= 0 {
				t.Fatalf("region at %d covers [%d,%d) len %d", o, r.Offset, r.NextOffset, r.Len)
			}
			r.Release()
			got, err := l.OffsetForTime(tsAt(o))
			if err != nil {
				t.Fatalf("time %d: %v", tsAt(o), err)
			}
			if r.Offset != got { // timestamps increase with offsets: the batch holding o
				t.Fatalf("offset for time of %d = %d, want batch %d", o, got, r.Offset)
			}
		}
		if got, _ := l.OffsetForTime(tsAt(next) + 1); got != next {
			t.Fatalf("offset for a future time = %d, want %d", got, next)
		}
		if got, _ := l.OffsetForTime(0); got != 0 {
			t.Fatalf("offset for time 0 = %d, want 0", got)
		}
	}
	check(l)
	l.Close()
	check(openLog(t, dir, opts))
}

func TestOutOfRange(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{InitialOffset: 100})
	next := appendN(t, l, 5)
	for _, o := range []int64{-1, 99, next + 1} {
		_, err := l.ReadRegion(o, 100)
		var oe *OffsetOutOfRangeError
		if !errors.As(err, &oe) || oe.Start != 100 || oe.End != next {
			t.Fatalf("offset %d: got %v", o, err)
		}
	}
	r, err := l.ReadRegion(next, 100)
	if err != nil || !r.Empty() || r.NextOffset != next {
		t.Fatalf("read at end: %+v %v", r, err)
	}
}

func TestRegionBudget(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{IndexInterval: 1 << 10})
	next := appendN(t, l, 500)
	for _, budget := range []int64{0, 1, 100, 1000, 5000, 1 << 20} {
		for o := int64(0); o < next; o += 37 {
			r, err := l.ReadRegion(o, budget)
			if err != nil {
				t.Fatal(err)
			}
			var buf []byte
			buf, _, _ = l.Read(buf, o, budget)
			if int64(len(buf)) != r.Len {
				t.Fatalf("read %d bytes, region %d", len(buf), r.Len)
			}
			// Whole batches, within budget unless a single batch is larger.
			n := 0
			for rest := buf; len(rest) > 0; n++ {
				h, err := batch.Check(rest)
				if err != nil {
					t.Fatalf("budget %d at %d: %v", budget, o, err)
				}
				rest = rest[h.Size():]
			}
			if r.Len > budget && n != 1 {
				t.Fatalf("budget %d at %d: %d bytes in %d batches", budget, o, r.Len, n)
			}
			if r.NextOffset < next && r.Len+int64(len(makeBatch(r.NextOffset))) <= budget {
				t.Fatalf("budget %d at %d: stopped at %d bytes with room for the next batch", budget, o, r.Len)
			}
			r.Release()
		}
	}
}

func TestRollByAge(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	l := openLog(t, t.TempDir(), Options{SegmentAge: time.Minute, Clock: clk.Now})
	appendN(t, l, 3)
	clk.Advance(59 * time.Second)
	appendN(t, l, 1)
	if n := stats(t, l).Segments; n != 1 {
		t.Fatalf("%d segments before the age limit", n)
	}
	clk.Advance(time.Second)
	appendN(t, l, 1)
	if n := stats(t, l).Segments; n != 2 {
		t.Fatalf("%d segments after the age limit", n)
	}
	checkContents(t, l)
}

func TestRetentionBySize(t *testing.T) {
	opts := Options{SegmentBytes: 4 << 10, RetentionBytes: 20 << 10, Sync: SyncNever}
	l := openLog(t, t.TempDir(), opts)
	appendN(t, l, 1000)
	before := stats(t, l)
	// Nothing above the limit offset may go.
	if n, err := l.ApplyRetention(-1); err != nil || n != 0 {
		t.Fatalf("retention below every segment deleted %d (%v)", n, err)
	}
	after := retainDurable(t, l, before)
	if after.Bytes < opts.RetentionBytes || after.Bytes > opts.RetentionBytes+opts.SegmentBytes {
		t.Fatalf("kept %d bytes for retention %d", after.Bytes, opts.RetentionBytes)
	}
	checkContents(t, l)
	if _, err := l.ReadRegion(after.Start-1, 10); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(l.Dir(), "*.log"))
	if len(files) != after.Segments {
		t.Fatalf("%d .log files for %d segments", len(files), after.Segments)
	}
}

// retainDurable applies retention up to the durable checkpoint to a log that was
// before, and returns its stats after: it must have deleted segments and moved its start.
func retainDurable(t *testing.T, l *Log, before Stats) Stats {
	t.Helper()
	n, err := l.ApplyRetention(l.Durable())
	if err != nil {
		t.Fatal(err)
	}
	after := stats(t, l)
	if n == 0 || after.Segments != before.Segments-n || after.Start == 0 {
		t.Fatalf("deleted %d: %+v -> %+v", n, before, after)
	}
	return after
}

// TestRetentionDiscardLeavesTheUnlinks: with Options.Discard, retention takes the
// segments out and renames their files to *.deleted, handing them to Discard instead of
// unlinking them on the caller's goroutine (the partition's shard). Here Discard only
// records them, as a reaper that has not run yet (the real one is the broker's, whose
// timing a test cannot hold): the log is as after any retention, reads below its start
// are out of range, every renamed file was handed over, and a reopen removes the ones
// left, as after a crash before the reaper ran.
func TestRetentionDiscardLeavesTheUnlinks(t *testing.T) {
	var handed []string
	dir := t.TempDir()
	opts := Options{SegmentBytes: 4 << 10, RetentionBytes: 20 << 10, Sync: SyncNever,
		Discard:       func(paths []string) { handed = append(handed, paths...) },
		ReuseSegments: -1} // every file is handed over (reuse_test.go keeps some)
	l := openLog(t, dir, opts)
	appendN(t, l, 1000)
	after := retainDurable(t, l, stats(t, l))
	if _, err := l.ReadRegion(after.Start-1, 10); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start: %v", err)
	}
	checkContents(t, l)
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	deleted, _ := filepath.Glob(filepath.Join(dir, "*.deleted"))
	if len(logs) != after.Segments {
		t.Fatalf("%d .log files for %d segments", len(logs), after.Segments)
	}
	if len(deleted) == 0 || len(deleted) != len(handed) {
		t.Fatalf("%d files renamed for deletion, %d handed to Discard", len(deleted), len(handed))
	}
	for _, p := range handed {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("handed %s, which is not there: %v", p, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, opts)
	if got := stats(t, l); got.Start != after.Start || got.Segments != after.Segments {
		t.Fatalf("reopened: %+v, want start %d and %d segments", got, after.Start, after.Segments)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.deleted")); len(left) != 0 {
		t.Fatalf("the reopen left %d *.deleted files", len(left))
	}
	checkContents(t, l)
}

// TestRetentionDiscardRenameFails: a file retention cannot rename for Discard (a full
// disk, injected) is removed at once instead: the segment, already out of the log, must
// not stay on disk under its live name, where nothing would delete it and a reopen would
// bring it back.
func TestRetentionDiscardRenameFails(t *testing.T) {
	var handed []string
	dir := t.TempDir()
	opts := Options{SegmentBytes: 4 << 10, RetentionBytes: 20 << 10, Sync: SyncNever,
		FS:      errorfs.Wrap(vfs.Default(), &errorfs.Rule{Op: errorfs.OpRename, Suffix: deletedSuffix, Err: syscall.ENOSPC}),
		Discard: func(paths []string) { handed = append(handed, paths...) }}
	l := openLog(t, dir, opts)
	appendN(t, l, 1000)
	after := retainDurable(t, l, stats(t, l))
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(logs) != after.Segments || len(handed) != 0 {
		t.Fatalf("%d .log files for %d segments, %d handed to Discard", len(logs), after.Segments, len(handed))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := stats(t, openLog(t, dir, opts)); got.Start != after.Start {
		t.Fatalf("reopened at start %d, want %d: a deleted segment came back", got.Start, after.Start)
	}
}

func TestRetentionByAgeKeepsHeldRegions(t *testing.T) {
	clk := &fakeClock{now: time.UnixMilli(tsAt(0))}
	l := openLog(t, t.TempDir(), Options{SegmentBytes: 4 << 10, RetentionAge: time.Hour, Clock: clk.Now})
	next := appendN(t, l, 300)
	r, err := l.ReadRegion(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	// All timestamps are within seconds of tsAt(0); an hour and a bit later, every sealed
	// segment has expired.
	clk.now = time.UnixMilli(tsAt(next)).Add(time.Hour + time.Second)
	n, err := l.ApplyRetention(l.Durable())
	if err != nil || n == 0 || stats(t, l).Segments != 1 {
		t.Fatalf("deleted %d, %d left (%v)", n, stats(t, l).Segments, err)
	}
	// The region's file was deleted but stays readable until released.
	buf := make([]byte, r.Len)
	if _, err := r.File.ReadAt(buf, r.Pos); err != nil {
		t.Fatalf("held region unreadable after retention: %v", err)
	}
	if _, err := batch.Check(buf); err != nil {
		t.Fatal(err)
	}
}

func TestTruncate(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 4 << 10, IndexInterval: 256}
	l := openLog(t, dir, opts)
	next := appendN(t, l, 400)
	// Collect batch boundaries.
	var lasts []int64
	for o := int64(0); o < next; o += int64(countAt(o)) {
		lasts = append(lasts, o+int64(countAt(o))-1)
	}
	for _, i := range []int{len(lasts) - 1, len(lasts) - 2, 300, 171, 170, 1, 0} {
		last := lasts[i]
		if err := l.Truncate(last); err != nil {
			t.Fatalf("truncate after %d: %v", last, err)
		}
		if l.Next() != last+1 || l.Durable() > last {
			t.Fatalf("after truncate to %d: next %d durable %d", last, l.Next(), l.Durable())
		}
		checkContents(t, l)
	}
	if err := l.Truncate(lasts[0] + 5); err != nil { // beyond the end: no-op
		t.Fatal(err)
	}
	appendN(t, l, 50)
	checkContents(t, l)
	next = l.Next()
	l.Close()
	l = openLog(t, dir, opts)
	if l.Next() != next {
		t.Fatalf("reopened after truncate: next %d, want %d", l.Next(), next)
	}
	checkContents(t, l)
	// Mid-batch truncation is refused and changes nothing.
	mid := int64(0)
	for o := int64(0); o < next; o += int64(countAt(o)) {
		if countAt(o) > 1 {
			mid = o
			break
		}
	}
	if err := l.Truncate(mid); !errors.Is(err, ErrNotBatchBoundary) {
		t.Fatalf("mid-batch truncate: %v", err)
	}
	if l.Next() != next {
		t.Fatal("refused truncate changed the log")
	}
	if err := l.Truncate(-1); err != nil || l.Next() != 0 {
		t.Fatalf("truncate everything: %v next %d", err, l.Next())
	}
	appendN(t, l, 3)
	checkContents(t, l)
}

// TestPersistPolicies: under every policy, placing writes nothing and moves Next only;
// Persist writes what is placed, fdatasyncs by the policy (group and batch: once per
// call that wrote; never: once per segment it sealed, none for the active one) and moves
// the checkpoint over it; the log reopens to the same end with the same contents.
func TestPersistPolicies(t *testing.T) {
	for _, mode := range []SyncMode{SyncGroup, SyncEveryBatch, SyncNever} {
		t.Run(mode.String(), func(t *testing.T) {
			rec := &opRecorder{}
			dir := t.TempDir()
			opts := Options{Sync: mode, SegmentBytes: 4 << 10, FS: recordingFS(rec)}
			l := openLog(t, dir, opts)
			src := NewMemSource()
			for round := range 30 {
				before, written := l.Next(), l.Written()
				next := placeN(t, l, src, 1+round%7)
				if l.Next() != next || l.Written() != written || l.Durable() != written-1 || l.Pending() == 0 {
					t.Fatalf("after placing [%d, %d): written %d durable %d pending %d", before, next, l.Written(), l.Durable(), l.Pending())
				}
				if r, err := l.ReadRegion(before, 1<<20); err != nil || !r.Empty() {
					t.Fatalf("read of a placed batch: %+v %v, want an empty region", r, err)
				}
				rec.reset()
				wrote, err := l.Persist(src)
				if err != nil || !wrote {
					t.Fatalf("persist: %v %v", wrote, err)
				}
				// A segment sealed writes its offset index (a rename into place).
				syncs, sealed := rec.count(errorfs.OpSync, ".log"), rec.count(errorfs.OpRename, indexSuffix)
				if mode == SyncNever && syncs != sealed || mode != SyncNever && syncs < 1 {
					t.Fatalf("round %d: %d fdatasyncs, %d segments sealed", round, syncs, sealed)
				}
				if l.Written() != next || l.Durable() != next-1 || l.Pending() != 0 {
					t.Fatalf("after persist: written %d durable %d pending %d, want %d", l.Written(), l.Durable(), l.Pending(), next)
				}
				if wrote, err := l.Persist(src); err != nil || wrote {
					t.Fatalf("persist with nothing placed: %v %v", wrote, err)
				}
			}
			if stats(t, l).Segments < 3 {
				t.Fatalf("%d segments: the test did not roll", stats(t, l).Segments)
			}
			checkContents(t, l)
			next := l.Next()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = openLog(t, dir, Options{Sync: mode, SegmentBytes: 4 << 10})
			if l.Next() != next || l.Damage() != nil {
				t.Fatalf("reopened at %d (damage %v), want %d", l.Next(), l.Damage(), next)
			}
			checkContents(t, l)
		})
	}
}

// TestPlaceRefusesBadSizes: Place takes whole batches only (the size the header says);
// MemSource.Append checks the bytes.
func TestPlaceRefusesBadSizes(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	src := NewMemSource()
	b := makeBatch(0)
	for name, bad := range map[string][]byte{
		"short":    b[:20],
		"trailing": append(append([]byte(nil), b...), 0),
		"cut":      b[:len(b)-1],
		"magic":    func() []byte { c := append([]byte(nil), b...); c[16] = 9; return c }(),
	} {
		if _, err := src.Append(l, bad, time.Now()); !errors.Is(err, ErrBadBatch) {
			t.Errorf("%s: %v", name, err)
		}
	}
	h, _ := batch.ParseHeader(b)
	if _, err := l.Place(h, int64(len(b))+1, time.Now()); !errors.Is(err, ErrBadBatch) {
		t.Errorf("wrong size: %v", err)
	}
	if l.Next() != 0 {
		t.Fatal("a bad batch was placed")
	}
}

func TestOpenRefusesForeignFiles(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, Options{})
	appendN(t, l, 3)
	l.Close()
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hi"), 0o644)
	_, err := Open(dir, Options{})
	var fe *ForeignFileError
	if !errors.As(err, &fe) || fe.Name != "notes.txt" {
		t.Fatalf("open with a foreign file: %v", err)
	}
	os.Remove(filepath.Join(dir, "notes.txt"))
	// A segment's name is digits only: a signed one is foreign, not a segment that sorts
	// before the real ones and moves the log's start (a fuzz target found it taken).
	for _, name := range []string{"+0000000000000000002.log", "-0000000000000000002.log"} {
		os.WriteFile(filepath.Join(dir, name), nil, 0o644)
		if _, err := Open(dir, Options{}); !errors.As(err, &fe) || fe.Name != name {
			t.Fatalf("open with %s: %v", name, err)
		}
		os.Remove(filepath.Join(dir, name))
	}
	// Leftovers of an interrupted rebuild and orphaned indexes are removed.
	for _, name := range []string{"00000000000000000000.index.tmp", "00000000000000000999.index"} {
		os.WriteFile(filepath.Join(dir, name), []byte("junk"), 0o644)
	}
	l = openLog(t, dir, Options{})
	checkContents(t, l)
	for _, name := range []string{"00000000000000000000.index.tmp", "00000000000000000999.index"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s not removed: %v", name, err)
		}
	}
}

func TestSegmentName(t *testing.T) {
	for _, c := range []struct {
		base int64
		want string
	}{{0, "d/00000000000000000000.log"}, {170410, "d/00000000000000170410.log"}, {1<<63 - 1, "d/09223372036854775807.log"}} {
		if got := segmentName("d", c.base, logSuffix); got != c.want {
			t.Errorf("segmentName(%d) = %s, want %s", c.base, got, c.want)
		}
		if kind, base := parseName(filepath.Base(c.want)); kind != kindLog || base != c.base {
			t.Errorf("parseName(%s) = %v %d", c.want, kind, base)
		}
	}
}

func TestWalkHeaders(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{SegmentBytes: 4 << 10, Sync: SyncNever})
	next := appendN(t, l, 300)
	for _, from := range []int64{0, 1, 77, next - 1, next} {
		var got []int64
		if err := l.WalkHeaders(from, func(h batch.Header) bool { got = append(got, h.BaseOffset); return true }); err != nil {
			t.Fatal(err)
		}
		want := []int64{}
		for o := int64(0); o < next; o += int64(countAt(o)) {
			if o+int64(countAt(o)) > from {
				want = append(want, o)
			}
		}
		if len(got) != len(want) || (len(got) > 0 && (got[0] != want[0] || got[len(got)-1] != want[len(want)-1])) {
			t.Fatalf("walk from %d: %d batches, want %d", from, len(got), len(want))
		}
	}
	n := 0
	l.WalkHeaders(0, func(batch.Header) bool { n++; return n < 5 })
	if n != 5 {
		t.Fatalf("walk did not stop: %d", n)
	}
}

// TestPlaceConcurrentWithPersist: the owner places while a persister persists and
// readers read, all at once (run with -race). Readers never see past what is written;
// each Persist moves the checkpoint to an offset that was placed; at the end, everything
// placed is written once, whole and in order.
func TestPlaceConcurrentWithPersist(t *testing.T) {
	for _, mode := range []SyncMode{SyncGroup, SyncNever} {
		t.Run(mode.String(), func(t *testing.T) {
			l := openLog(t, t.TempDir(), Options{Sync: mode, SegmentBytes: 32 << 10, IndexInterval: 1 << 10})
			src := NewMemSource()
			done := make(chan struct{})
			errc := make(chan error, 2)
			go func() { // the persister
				for {
					select {
					case <-done:
						errc <- nil
						return
					default:
					}
					before := l.Next()
					if _, err := l.Persist(src); err != nil {
						errc <- err
						return
					}
					if d := l.Durable(); d < before-1 || d >= l.Next() {
						errc <- fmt.Errorf("durable %d after a persist begun at next %d (now %d)", d, before, l.Next())
						return
					}
				}
			}()
			go func() { // a reader
				var buf []byte
				for {
					select {
					case <-done:
						errc <- nil
						return
					default:
					}
					w := l.Written()
					var err error
					if buf, _, err = l.Read(buf[:0], max(l.Start(), w-50), 1<<20); err != nil {
						errc <- err
						return
					}
					for rest := buf; len(rest) > 0; {
						h, err := batch.Check(rest)
						if err != nil {
							errc <- err
							return
						}
						if h.LastOffset() >= l.Written() {
							errc <- fmt.Errorf("read batch %d..%d past the written end %d", h.BaseOffset, h.LastOffset(), l.Written())
							return
						}
						rest = rest[h.Size():]
					}
				}
			}()
			for range 3000 {
				placeN(t, l, src, 1)
			}
			close(done)
			for range 2 {
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
			}
			persistAll(t, l, src)
			if stats(t, l).Segments < 5 {
				t.Fatalf("%d segments: the test did not roll", stats(t, l).Segments)
			}
			checkContents(t, l)
		})
	}
}

// TestRetentionByAgeTrustsNoProducerClock: records stamped two hours behind the log's
// clock (a producer whose clock runs late, or jumped back) are not deleted by a one-hour
// retention as soon as their segments seal: a segment is kept until both its newest
// timestamp and its seal are older than the retention age. Before, the timestamps alone
// decided, and every sealed segment went at the next retention pass. A segment found
// sealed at open counts from its file's last write.
func TestRetentionByAgeTrustsNoProducerClock(t *testing.T) {
	clk := &fakeClock{now: time.UnixMilli(tsAt(0)).Add(2 * time.Hour)}
	dir := t.TempDir()
	opts := Options{SegmentBytes: 4 << 10, RetentionAge: time.Hour, Clock: clk.Now}
	l := openLog(t, dir, opts)
	appendN(t, l, 300)
	sealed := stats(t, l).Segments - 1
	if sealed < 2 {
		t.Fatalf("%d sealed segments: the test needs several", sealed)
	}
	if n, err := l.ApplyRetention(l.Durable()); err != nil || n != 0 {
		t.Fatalf("retention deleted %d segments sealed a moment ago (%v)", n, err)
	}
	clk.Advance(time.Hour + time.Second)
	if n, err := l.ApplyRetention(l.Durable()); err != nil || n != sealed {
		t.Fatalf("an hour after their seal: deleted %d of %d (%v)", n, sealed, err)
	}

	// Sealed before an open: the file's last write is the seal.
	dir = t.TempDir()
	clk.now = time.UnixMilli(tsAt(0)).Add(2 * time.Hour)
	l = openLog(t, dir, opts)
	appendN(t, l, 300)
	sealed = stats(t, l).Segments - 1
	l.Close()
	l = openLog(t, dir, opts)
	// The files were written now, by the real clock: far after the log's (2023) clock.
	if n, err := l.ApplyRetention(l.Durable()); err != nil || n != 0 {
		t.Fatalf("after reopening: deleted %d segments whose files were just written (%v)", n, err)
	}
	l.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	old := clk.now.Add(-2 * time.Hour)
	for _, f := range files {
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
	}
	l = openLog(t, dir, opts)
	if n, err := l.ApplyRetention(l.Durable()); err != nil || n != sealed {
		t.Fatalf("files last written two hours ago: deleted %d of %d (%v)", n, sealed, err)
	}
}
