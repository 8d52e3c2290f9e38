package local

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sluice/batch"
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

// failingPersist places batches and persists them until the injected fault hits, and
// returns the checkpoint before it and the error.
func failingPersist(t *testing.T, l *Log, src *MemSource) (int64, error) {
	t.Helper()
	for range 1000 {
		durable := l.Durable()
		placeN(t, l, src, 1+int(l.Next()%4))
		if _, err := l.Persist(src); err != nil {
			return durable, err
		}
	}
	t.Fatal("the fault never hit")
	return 0, nil
}

// checkFailed checks a log failed by an I/O error: the checkpoint did not move, every
// write refuses with ErrFailed without touching the disk again (the failed operation is
// never retried), reads of what is written still work, and a reopen recovers at least
// everything that was durable.
func checkFailed(t *testing.T, l *Log, dir string, rule *errorfs.Rule, err error, durable int64, cause error) {
	t.Helper()
	if !errors.Is(err, ErrFailed) || !errors.Is(err, cause) {
		t.Fatalf("persist with a failing disk: %v", err)
	}
	if l.Durable() != durable {
		t.Fatalf("durable moved from %d to %d", durable, l.Durable())
	}
	fired := rule.Fired()
	if _, err := l.Persist(NewMemSource()); !errors.Is(err, ErrFailed) || rule.Fired() != fired {
		t.Fatalf("persist after failure: %v (retried: %v)", err, rule.Fired() != fired)
	}
	h, _ := batch.ParseHeader(makeBatch(l.Next()))
	if _, err := l.Place(h, int64(h.Size()), time.Now()); !errors.Is(err, ErrFailed) {
		t.Fatalf("place after failure: %v", err)
	}
	for o := l.Start(); o < l.Written(); {
		r, err := l.ReadRegion(o, 1<<20)
		if err != nil || r.Empty() {
			t.Fatalf("read at %d of a failed log: %v", o, err)
		}
		o = r.NextOffset
		r.Release()
	}
	l.Close()
	l = openLog(t, dir, Options{SegmentBytes: l.opts.SegmentBytes})
	if l.Next()-1 < durable || l.Damage() != nil {
		t.Fatalf("reopened at %d (damage %v), lost durable %d", l.Next(), l.Damage(), durable)
	}
	checkContents(t, l)
}

// TestWriteErrorFailsTheLog: EIO on a segment write fails the log for good.
func TestWriteErrorFailsTheLog(t *testing.T) {
	for _, mode := range []SyncMode{SyncGroup, SyncNever} {
		rule := &errorfs.Rule{Op: errorfs.OpWrite, Suffix: ".log", Skip: 25, Err: syscall.EIO}
		l, dir := faultyLog(t, rule, Options{Sync: mode, SegmentBytes: 8 << 10})
		durable, err := failingPersist(t, l, NewMemSource())
		checkFailed(t, l, dir, rule, err, durable, syscall.EIO)
	}
}

// TestNoSpaceOnWriteFailsTheLog: ENOSPC on a write into a segment (past its
// preallocation, or on a filesystem that cannot preallocate) fails the log like any
// write error: the bytes of a failed write are never retried. A torn write, half of it
// on the disk and reported as nothing, is cut off by the reopen.
func TestNoSpaceOnWriteFailsTheLog(t *testing.T) {
	for _, werr := range []error{syscall.ENOSPC, &errorfs.Torn{Err: syscall.ENOSPC, Keep: -1, Reported: 0}} {
		rule := &errorfs.Rule{Op: errorfs.OpWrite, Suffix: ".log", Skip: 40, Err: werr}
		l, dir := faultyLog(t, rule, Options{SegmentBytes: 8 << 10})
		src := NewMemSource()
		for l.Pending() < 6<<10 { // a big persist: half of it is whole blocks
			placeN(t, l, src, 1)
		}
		durable, err := failingPersist(t, l, src)
		checkFailed(t, l, dir, rule, err, durable, syscall.ENOSPC)
	}
}

// TestFdatasyncFailureFailsTheLog: EIO on fdatasync, of the active segment or of one
// being sealed, fails the log; the sync is never retried.
func TestFdatasyncFailureFailsTheLog(t *testing.T) {
	for _, skip := range []int{5, 30} {
		rule := &errorfs.Rule{Op: errorfs.OpSync, Suffix: ".log", Skip: skip, Err: syscall.EIO}
		l, dir := faultyLog(t, rule, Options{Sync: SyncEveryBatch, SegmentBytes: 4 << 10})
		durable, err := failingPersist(t, l, NewMemSource())
		checkFailed(t, l, dir, rule, err, durable, syscall.EIO)
	}
}

// TestNoSpaceCreatingASegment: a full disk while creating the next segment file (the
// create itself, or its preallocation) is ErrNoSpace: no file is left behind, nothing
// placed is lost, Place refuses with ErrNoSpace until a Persist gets the file, and the
// log then goes on as if nothing happened.
func TestNoSpaceCreatingASegment(t *testing.T) {
	for _, op := range []errorfs.Op{errorfs.OpAllocate, errorfs.OpCreate} {
		t.Run(op.String(), func(t *testing.T) {
			rule := &errorfs.Rule{Op: op, Suffix: ".log", Skip: 2, Times: 3, Err: syscall.ENOSPC}
			l, dir := faultyLog(t, rule, Options{SegmentBytes: 4 << 10})
			src := NewMemSource()
			var err error
			for range 1000 {
				placeN(t, l, src, 1)
				if _, err = l.Persist(src); err != nil {
					break
				}
			}
			if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("persist with a full disk: %v", err)
			}
			segs := stats(t, l).Segments
			if files, _ := filepath.Glob(filepath.Join(dir, "*.log")); len(files) != segs-1 {
				t.Fatalf("%d files for %d segments: the one that could not be created was left", len(files), segs)
			}
			next, durable := l.Next(), l.Durable()
			h, _ := batch.ParseHeader(makeBatch(next))
			if _, err := l.Place(h, int64(h.Size()), time.Now()); !errors.Is(err, ErrNoSpace) {
				t.Fatalf("place after a full disk: %v", err)
			}
			for rule.Fired() < 3 { // still full: refused again, nothing lost
				if _, err := l.Persist(src); !errors.Is(err, ErrNoSpace) {
					t.Fatalf("persist on a full disk: %v", err)
				}
			}
			if l.Next() != next || l.Durable() != durable {
				t.Fatalf("a refused persist moved next %d -> %d, durable %d -> %d", next, l.Next(), durable, l.Durable())
			}
			persistAll(t, l, src) // space is back
			appendN(t, l, 100)
			checkContents(t, l)
			next = l.Next()
			l.Close()
			l = openLog(t, dir, Options{SegmentBytes: 4 << 10})
			if l.Next() != next || l.Damage() != nil {
				t.Fatalf("reopened at %d (damage %v), want %d", l.Next(), l.Damage(), next)
			}
			checkContents(t, l)
		})
	}
}

// TestNoSpaceSealing: a full disk while writing a sealed segment's index files is
// ErrNoSpace too; the next Persist finishes the seal.
func TestNoSpaceSealing(t *testing.T) {
	rule := &errorfs.Rule{Op: errorfs.OpWrite, Suffix: ".index.tmp", Times: 2, Err: syscall.ENOSPC}
	l, _ := faultyLog(t, rule, Options{SegmentBytes: 4 << 10})
	src := NewMemSource()
	failures := 0
	for range 300 {
		if _, err := l.Persist(src); err != nil {
			if !errors.Is(err, ErrNoSpace) {
				t.Fatal(err)
			}
			failures++
			continue // Place refuses until a Persist succeeds
		}
		placeN(t, l, src, 1)
	}
	persistAll(t, l, src)
	if failures != 2 || stats(t, l).Segments < 3 {
		t.Fatalf("%d failures, %d segments", failures, stats(t, l).Segments)
	}
	checkContents(t, l)
}

// TestCreateSegmentFails: any other error creating a segment fails the log.
func TestCreateSegmentFails(t *testing.T) {
	rule := &errorfs.Rule{Op: errorfs.OpCreate, Suffix: ".log", Skip: 1, Times: 1, Err: syscall.EACCES}
	l, _ := faultyLog(t, rule, Options{SegmentBytes: 4 << 10})
	src := NewMemSource()
	var err error
	for err == nil {
		placeN(t, l, src, 1)
		_, err = l.Persist(src)
	}
	if !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EACCES) {
		t.Fatalf("roll with a failing create: %v", err)
	}
	checkContents(t, l)
}

// TestSourceErrorLeavesTheLogUsable: a source that cannot give the bytes makes Persist
// fail without writing them; the log is not failed, and a Persist with the bytes goes on.
func TestSourceErrorLeavesTheLogUsable(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{})
	appendN(t, l, 5)
	src := NewMemSource()
	placeN(t, l, src, 3)
	written := l.Written()
	if _, err := l.Persist(NewMemSource()); err == nil || errors.Is(err, ErrFailed) || l.Written() != written {
		t.Fatalf("persist from an empty source: %v, written %d -> %d", err, written, l.Written())
	}
	persistAll(t, l, src)
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
	if l.rollDueLocked(seg, 100, seg.base+math.MaxUint32, now) {
		t.Fatal("rolled with the last offset at 2^32-1 past the base")
	}
	if !l.rollDueLocked(seg, 100, seg.base+math.MaxUint32+1, now) {
		t.Fatal("did not roll with the last offset at 2^32 past the base")
	}
}

// growthRefused is an injector that refuses with ENOSPC every preallocation of a file
// after its first: the disk had room for a segment of SegmentBytes, not for more.
type growthRefused struct {
	mu      sync.Mutex
	seen    map[string]int
	refused int
}

func (g *growthRefused) MaybeError(op errorfs.Op, path string) error {
	if op != errorfs.OpAllocate {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen == nil {
		g.seen = map[string]int{}
	}
	g.seen[path]++
	if g.seen[path] > 1 {
		g.refused++
		return syscall.ENOSPC
	}
	return nil
}

// TestOversizedBatchOnAFullDisk: a batch larger than SegmentBytes takes a segment of its
// own, whose file must grow past its preallocation. When the disk has no room for that,
// Persist says ErrNoSpace before writing a byte (it did fail the log: the write past the
// preallocated end ran out of space on a nearly full tmpfs), the log stays usable, and
// the batch is written once there is room.
func TestOversizedBatchOnAFullDisk(t *testing.T) {
	const segBytes = 64 << 10
	disk := &growthRefused{}
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentBytes: segBytes, FS: errorfs.Wrap(vfs.Default(), disk)})
	src := NewMemSource()
	placeN(t, l, src, 3)
	persistAll(t, l, src)
	var b batch.Builder
	b.Reset(nil, 0, -1)
	for i := range 100 {
		b.Add(0, tsAt(int64(i)), nil, []byte(strings.Repeat("b", 1000)))
	}
	big := b.Finish()
	p, err := src.Append(l, big, time.Now())
	if err != nil || !p.Roll {
		t.Fatalf("place a batch of %d bytes (segments of %d): %+v, %v", len(big), segBytes, p, err)
	}
	if _, err := l.Persist(src); !errors.Is(err, ErrNoSpace) || errors.Is(err, ErrFailed) {
		t.Fatalf("persist with no room to grow the segment: %v, want ErrNoSpace", err)
	}
	if disk.refused != 1 || l.Durable() >= p.Base {
		t.Fatalf("refused %d preallocations; durable %d, the batch at %d", disk.refused, l.Durable(), p.Base)
	}
	// Room again (the injector refuses growth only once per file: its next call is the
	// second for that path too, so let it through).
	disk.mu.Lock()
	disk.seen = nil
	disk.mu.Unlock()
	persistAll(t, l, src)
	next := l.Next()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, Options{SegmentBytes: segBytes})
	if l.Next() != next || l.Damage() != nil {
		t.Fatalf("reopened at %d (damage %v), want %d", l.Next(), l.Damage(), next)
	}
	r, err := l.ReadRegion(p.Base, 1<<20)
	if err != nil || r.Empty() {
		t.Fatalf("read the big batch back: %v", err)
	}
	r.Release()
}
