package local

import (
	"errors"
	"syscall"
	"testing"

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
