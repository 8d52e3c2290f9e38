package local

import (
	"errors"
	"math"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sluice/persist/vfs"
	"sluice/persist/vfs/errorfs"
)

// These tests inject I/O faults through errorfs, a wrapper around the real filesystem:
// a real disk cannot be made to fail an fsync or fill up on cue.

func faultyLog(t *testing.T, rule *errorfs.Rule, opts Options) (*Log, string) {
	t.Helper()
	dir := t.TempDir()
	opts.FS = errorfs.Wrap(vfs.Default(), rule)
	return openLog(t, dir, opts), dir
}

func TestNoSpaceOnAppend(t *testing.T) {
	rule := &errorfs.Rule{Op: errorfs.OpWrite, Suffix: ".log", Skip: 10, Times: 3, Err: syscall.ENOSPC}
	l, dir := faultyLog(t, rule, Options{Sync: SyncEveryBatch})
	appendN(t, l, 10)
	before := l.Next()
	for range 3 {
		if _, err := l.Append(makeBatch(before)); !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("append on a full disk: %v", err)
		}
	}
	if l.Next() != before || l.Durable() != before-1 {
		t.Fatalf("failed append moved the log: next %d durable %d", l.Next(), l.Durable())
	}
	checkContents(t, l) // the half-written batch was cut off
	appendN(t, l, 5)    // space is back: the log goes on
	checkContents(t, l)
	next := l.Next()
	l.Close()
	l = openLog(t, dir, Options{})
	if l.Next() != next {
		t.Fatalf("reopened: next %d, want %d", l.Next(), next)
	}
	checkContents(t, l)
}

func TestFsyncFailureFailsTheLog(t *testing.T) {
	rule := &errorfs.Rule{Op: errorfs.OpSync, Suffix: ".log", Skip: 5, Err: syscall.EIO}
	l, dir := faultyLog(t, rule, Options{Sync: SyncEveryBatch})
	appendN(t, l, 5)
	durable := l.Durable()
	_, err := l.Append(makeBatch(l.Next()))
	if !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("append with a failing fsync: %v", err)
	}
	if l.Durable() != durable {
		t.Fatalf("durable moved to %d after a failed fsync", l.Durable())
	}
	// Sticky: no further write, no retried fsync.
	fired := rule.Fired()
	if _, err := l.Append(makeBatch(l.Next())); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after failure: %v", err)
	}
	if err := l.Sync(); !errors.Is(err, ErrFailed) || rule.Fired() != fired {
		t.Fatalf("sync after failure: %v (fsync retried: %v)", err, rule.Fired() != fired)
	}
	// Reads still work; reopening recovers everything that was durable.
	checkContents(t, l)
	l.Close()
	l = openLog(t, dir, Options{})
	if l.Next()-1 < durable {
		t.Fatalf("reopened at %d, lost durable %d", l.Next(), durable)
	}
	checkContents(t, l)
}

func TestWriteErrorFailsTheLog(t *testing.T) {
	rule := &errorfs.Rule{Op: errorfs.OpWrite, Suffix: ".log", Skip: 3, Times: 1, Err: syscall.EIO}
	l, _ := faultyLog(t, rule, Options{})
	appendN(t, l, 3)
	if _, err := l.Append(makeBatch(l.Next())); !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("append with an I/O error: %v", err)
	}
	if _, err := l.Append(makeBatch(l.Next())); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after failure: %v", err)
	}
}

func TestNoSpaceOnRoll(t *testing.T) {
	// Sealing writes the index files; a full disk there leaves the active segment as is.
	rule := &errorfs.Rule{Op: errorfs.OpWrite, Suffix: ".index.tmp", Times: 2, Err: syscall.ENOSPC}
	l, _ := faultyLog(t, rule, Options{SegmentBytes: 4 << 10})
	next := l.Next()
	var failures int
	for range 200 {
		_, err := l.Append(makeBatch(next))
		if errors.Is(err, ErrNoSpace) {
			failures++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		next += int64(countAt(next))
	}
	if failures != 2 || stats(t, l).Segments < 3 {
		t.Fatalf("%d failures, %d segments", failures, stats(t, l).Segments)
	}
	checkContents(t, l)
}

func TestCreateSegmentFails(t *testing.T) {
	rule := &errorfs.Rule{Op: errorfs.OpCreate, Suffix: ".log", Skip: 1, Times: 1, Err: syscall.EACCES}
	l, _ := faultyLog(t, rule, Options{SegmentBytes: 4 << 10})
	next := l.Next()
	for {
		_, err := l.Append(makeBatch(next))
		if err != nil {
			if !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EACCES) {
				t.Fatalf("roll with a failing create: %v", err)
			}
			break
		}
		next += int64(countAt(next))
	}
	checkContents(t, l)
}

func TestOpenErrors(t *testing.T) {
	rule := &errorfs.Rule{Op: errorfs.OpList, Err: syscall.EACCES}
	_, err := Open(t.TempDir(), Options{FS: errorfs.Wrap(vfs.Default(), rule)})
	if !errors.Is(err, syscall.EACCES) {
		t.Fatalf("open with an unreadable directory: %v", err)
	}
	// A read error during recovery must not truncate anything.
	dir := t.TempDir()
	bases := buildLog(t, dir, Options{}, 20)
	rule = &errorfs.Rule{Op: errorfs.OpRead, Suffix: ".log", Err: syscall.EIO}
	if _, err := Open(dir, Options{FS: errorfs.Wrap(vfs.Default(), rule)}); !errors.Is(err, syscall.EIO) {
		t.Fatalf("open with a read error: %v", err)
	}
	l := openLog(t, dir, Options{})
	if l.Next() != bases[len(bases)-1] {
		t.Fatalf("a read error during recovery lost data: next %d, want %d", l.Next(), bases[len(bases)-1])
	}
}

func TestInvalidOptions(t *testing.T) {
	for _, o := range []Options{
		{SegmentBytes: 100},
		{IndexInterval: -1},
		{RetentionBytes: -5},
		{Sync: SyncMode(9)},
		{InitialOffset: -1},
	} {
		if _, err := Open(t.TempDir(), o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
}

// TestTornWriteReportedAsZero: a write that puts half a batch into the file and then
// reports 0 bytes with ENOSPC (what os.File.WriteAt returns after a short write followed
// by ENOSPC) must still be cut off, so the torn bytes are never sealed into a segment.
// Appends, rolls, a close and a reopen then give a valid log holding every acknowledged
// batch.
func TestTornWriteReportedAsZero(t *testing.T) {
	torn := &errorfs.Torn{Err: syscall.ENOSPC, Keep: -1, Reported: 0}
	inj := &everyNth{n: 7, suffix: ".log", op: errorfs.OpWrite, err: torn}
	dir := t.TempDir()
	opts := Options{SegmentBytes: 4 << 10, FS: errorfs.Wrap(vfs.Default(), inj)}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	var acked []int64
	failures := 0
	for range 400 {
		next := l.Next()
		base, err := l.Append(makeBatch(next))
		if err != nil {
			if !errors.Is(err, ErrNoSpace) {
				t.Fatalf("append at %d: %v", next, err)
			}
			failures++
			if l.Next() != next {
				t.Fatalf("a failed append moved the log to %d", l.Next())
			}
			if size := fileSize(t, lastSegment(t, dir)); size != activeSize(l) {
				t.Fatalf("after a torn write the active segment is %d bytes, the log's end is %d", size, activeSize(l))
			}
			continue
		}
		acked = append(acked, base)
	}
	if failures < 20 || stats(t, l).Segments < 10 {
		t.Fatalf("%d failures, %d segments: the test did not exercise rolls after torn writes", failures, stats(t, l).Segments)
	}
	checkContents(t, l)
	next := l.Next()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	problems, err := Inspect(nil, dir, nil)
	if err != nil || len(problems) != 0 {
		t.Fatalf("inspect after torn writes: %v %v", problems, err)
	}
	l = openLog(t, dir, Options{SegmentBytes: 4 << 10})
	if l.Next() != next || l.Damage() != nil {
		t.Fatalf("reopened: next %d (want %d), damage %v", l.Next(), next, l.Damage())
	}
	checkContents(t, l)
	for _, base := range acked {
		r, err := l.ReadRegion(base, 1)
		if err != nil || r.Offset != base {
			t.Fatalf("acknowledged batch %d: region at %d, %v", base, r.Offset, err)
		}
		r.Release()
	}
}

// TestTornWriteCutFails: when the torn bytes cannot be cut off, the log fails for good.
func TestTornWriteCutFails(t *testing.T) {
	torn := &errorfs.Torn{Err: syscall.ENOSPC, Keep: -1, Reported: 0}
	inj := injectors{
		&errorfs.Rule{Op: errorfs.OpWrite, Suffix: ".log", Skip: 5, Times: 1, Err: torn},
		&errorfs.Rule{Op: errorfs.OpTruncate, Suffix: ".log", Err: syscall.EIO},
	}
	dir := t.TempDir()
	l := openLog(t, dir, Options{FS: errorfs.Wrap(vfs.Default(), inj)})
	appendN(t, l, 5)
	next := l.Next()
	if _, err := l.Append(makeBatch(next)); !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("append with a torn write that cannot be cut: %v", err)
	}
	if _, err := l.Append(makeBatch(next)); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after failure: %v", err)
	}
}

// everyNth fails every n-th matching operation with err.
type everyNth struct {
	n      int
	suffix string
	op     errorfs.Op
	err    error

	mu struct {
		sync.Mutex
		seen int
	}
}

func (e *everyNth) MaybeError(op errorfs.Op, path string) error {
	if op != e.op || !strings.HasSuffix(path, e.suffix) {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.mu.seen++
	if e.mu.seen%e.n == 0 {
		return e.err
	}
	return nil
}

// injectors asks each injector in turn; the first error wins.
type injectors []errorfs.Injector

func (is injectors) MaybeError(op errorfs.Op, path string) error {
	for _, in := range is {
		if err := in.MaybeError(op, path); err != nil {
			return err
		}
	}
	return nil
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestRollBounds: the roll settings have floors and ceilings, with messages that say
// which setting and why; the tests' own smallest settings stay valid.
func TestRollBounds(t *testing.T) {
	for _, c := range []struct {
		opts Options
		want string // "" when valid
	}{
		{Options{SegmentAge: time.Millisecond}, "segment age 1ms out of range [1s, 876000h0m0s]"},
		{Options{SegmentAge: 999 * time.Millisecond}, "segment age"},
		{Options{SegmentAge: time.Second}, ""},
		{Options{SegmentAge: MaxSegmentAge}, ""},
		{Options{SegmentAge: MaxSegmentAge + 1}, "segment age"},
		{Options{SegmentAge: -time.Second}, "segment age"},
		{Options{SegmentBytes: MinSegmentBytes - 1}, "segment bytes 4095 out of range [4KiB, 1TiB]"},
		{Options{SegmentBytes: MinSegmentBytes}, ""},
		{Options{SegmentBytes: MaxSegmentBytes + 1}, "segment bytes"},
		{Options{RecoveryPointInterval: time.Millisecond}, "recovery point interval"},
		{Options{RecoveryPointInterval: 2 * time.Hour}, "recovery point interval"},
	} {
		c.opts.EnsureDefaults()
		err := c.opts.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: got %v, want %q", c.opts.String(), err, c.want)
		}
	}
}

// TestRollKeepsRelativeOffsetsIn32Bits: a segment rolls before it would hold an offset
// more than 2^32-1 past its base (the index stores offsets relative to the base in 32
// bits; compressed batches can pack that many records in far fewer bytes).
func TestRollKeepsRelativeOffsetsIn32Bits(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	appendN(t, l, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	seg := l.activeLocked()
	now := l.opts.Clock()
	l.next.Store(seg.base + math.MaxUint32 - 9)
	if l.rollDueLocked(seg, 100, 10, now) {
		t.Fatal("rolled with the last offset at 2^32-1 past the base")
	}
	if !l.rollDueLocked(seg, 100, 11, now) {
		t.Fatal("did not roll with the last offset at 2^32 past the base")
	}
}
