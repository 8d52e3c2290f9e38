package local

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"sluice/batch"
	"sluice/persist/vfs/errorfs"
)

func TestRecoveryPointEncoding(t *testing.T) {
	for _, rp := range []RecoveryPoint{{Offset: -1}, {Offset: 0, Clean: true}, {Offset: 1<<63 - 1}} {
		b := appendRecoveryPoint(nil, rp)
		if got, reason := decodeRecoveryPoint(b); reason != "" || got != rp {
			t.Fatalf("%+v: round trip gave %+v (%s)", rp, got, reason)
		}
		for i := range b { // every single-byte change is refused
			c := append([]byte(nil), b...)
			c[i] ^= 0x04
			if _, reason := decodeRecoveryPoint(c); reason == "" {
				t.Fatalf("%+v: byte %d changed and accepted", rp, i)
			}
		}
		if _, reason := decodeRecoveryPoint(b[:len(b)-1]); reason == "" {
			t.Fatal("short file accepted")
		}
	}
	if _, err := ReadRecoveryPoint(nil, t.TempDir()); !errors.Is(err, ErrNoRecoveryPoint) {
		t.Fatalf("missing file: %v", err)
	}
}

// TestCloseWritesRecoveryPointWithSyncNever: with SyncNever nothing is fsynced while the
// log runs, and Close fsyncs every segment written and the directory before it records
// the clean end, so that the record holds after a host crash too.
func TestCloseWritesRecoveryPointWithSyncNever(t *testing.T) {
	rec := &opRecorder{}
	dir := t.TempDir()
	l := openLog(t, dir, Options{SegmentBytes: 4 << 10, Sync: SyncNever, FS: recordingFS(rec)})
	next := appendN(t, l, 300)
	// Before Close: every sealed segment fsynced once and covered by the record, the
	// active one neither (recordSealed).
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(files) < 5 {
		t.Fatalf("only %d segments", len(files))
	}
	sort.Strings(files) // zero-padded bases: by name is by offset
	synced := rec.paths(errorfs.OpSync)
	for _, f := range files[:len(files)-1] {
		if !synced[f] {
			t.Errorf("sealed segment %s not fsynced before Close", f)
		}
	}
	active := files[len(files)-1]
	if synced[active] {
		t.Errorf("the active segment %s fsynced before Close with SyncNever", active)
	}
	if n, want := rec.count(errorfs.OpSync, ".log"), len(files)-1; n != want {
		t.Errorf("%d fsyncs of segments before Close, want one per sealed segment: %d", n, want)
	}
	_, activeBase := parseName(filepath.Base(active))
	if rp := readRP(t, dir); rp.Offset != activeBase-1 || rp.Clean {
		t.Fatalf("recovery point %+v before Close, want the end of the last sealed segment, %d, not clean", rp, activeBase-1)
	}
	rec.reset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if synced := rec.paths(errorfs.OpSync); !synced[active] {
		t.Errorf("Close did not fsync the active segment %s", active)
	}
	if rec.count(errorfs.OpSyncDir, "") == 0 {
		t.Error("Close did not sync the directory")
	}
	if rp := readRP(t, dir); rp.Offset != next-1 || !rp.Clean {
		t.Fatalf("recovery point %+v, want a clean one at %d", rp, next-1)
	}
	// Closing again, or opening and closing without appends, writes nothing new.
	rec.reset()
	l = openLog(t, dir, Options{SegmentBytes: 4 << 10, Sync: SyncNever, FS: recordingFS(rec)})
	l.Close()
	if n := rec.count(errorfs.OpCreate, recoveryPointName+".tmp"); n != 0 {
		t.Fatalf("an unchanged log rewrote its recovery point %d times", n)
	}
}

// TestPersistWritesRecoveryPointAtABoundedRate: Persist records its checkpoint at most
// every RecoveryPointInterval, never per batch.
func TestPersistWritesRecoveryPointAtABoundedRate(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1000, 0)}
	rec := &opRecorder{}
	dir := t.TempDir()
	l := openLog(t, dir, Options{Sync: SyncEveryBatch, SegmentBytes: 1 << 20, RecoveryPointInterval: time.Minute, Clock: clk.Now, FS: recordingFS(rec)})
	writes := func() int { return rec.count(errorfs.OpRename, recoveryPointName) }
	appendN(t, l, 1)
	if writes() != 0 {
		t.Fatalf("%d recovery point writes right after open", writes())
	}
	clk.Advance(time.Minute)
	first := appendN(t, l, 1) // an interval after open
	if writes() != 1 || readRP(t, dir).Offset != first-1 {
		t.Fatalf("%d writes, recovery point %+v, want 1 at %d", writes(), readRP(t, dir), first-1)
	}
	for range 50 {
		appendN(t, l, 1)
		clk.Advance(time.Second)
	}
	if writes() != 1 {
		t.Fatalf("%d recovery point writes for 50 appends within the interval", writes())
	}
	clk.Advance(10 * time.Second)
	next := appendN(t, l, 1)
	if writes() != 2 || readRP(t, dir).Offset != next-1 || readRP(t, dir).Clean {
		t.Fatalf("after the interval: %d writes, %+v, want 2 and %d", writes(), readRP(t, dir), next-1)
	}
	if rec.count(errorfs.OpSync, ".log") < 53 {
		t.Fatal("the test did not fsync every batch")
	}
}

// TestMissingRecoveryPointFallsBack: without a recovery point, or with an unreadable
// one, recovery cuts the last segment at its first bad batch (as before recovery points)
// and says so; with an fsync policy it then records the recovered end, so the same
// corruption found again is damage.
func TestMissingRecoveryPointFallsBack(t *testing.T) {
	src := t.TempDir()
	opts := Options{SegmentBytes: 8 << 10}
	bases := buildLog(t, src, opts, 100)
	for name, spoil := range map[string]func(path string){
		"missing":  func(p string) { os.Remove(p) },
		"corrupt":  func(p string) { patchFile(t, p, func(d []byte) []byte { d[9] ^= 1; return d }) },
		"short":    func(p string) { patchFile(t, p, func(d []byte) []byte { return d[:7] }) },
		"too long": func(p string) { patchFile(t, p, func(d []byte) []byte { return append(d, 0) }) },
	} {
		dir := copyDir(t, src)
		spoil(filepath.Join(dir, recoveryPointName))
		seg := lastSegment(t, dir)
		last := layout(t, src)[len(bases)-2]
		patchFile(t, seg, func(d []byte) []byte { d[last.pos+last.size-10] ^= 1; return d }) // the last batch
		rec := &logRecorder{}
		l := openLog(t, dir, Options{SegmentBytes: 8 << 10, Logger: rec.logger()})
		if l.Damage() != nil || l.Next() != bases[99] {
			t.Fatalf("%s: damage %v, next %d, want the last batch cut (%d)", name, l.Damage(), l.Next(), bases[99])
		}
		if rec.count(slog.LevelWarn, "no valid recovery point") != 1 {
			t.Fatalf("%s: the fallback was not reported", name)
		}
		checkContents(t, l)
		l.Close()
		if rp := readRP(t, dir); rp.Offset != bases[99]-1 {
			t.Fatalf("%s: recovery point %+v after the fallback, want %d", name, rp, bases[99]-1)
		}
	}
}

// TestLogEndsBelowRecoveryPoint: acknowledged data missing from the end (a segment cut
// short or gone) is damage, not a shorter log.
func TestLogEndsBelowRecoveryPoint(t *testing.T) {
	src := t.TempDir()
	opts := Options{SegmentBytes: 8 << 10, Sync: SyncNever}
	buildLog(t, src, opts, 200)
	all := layout(t, src)
	files, _ := filepath.Glob(filepath.Join(src, "*.log"))

	dir := copyDir(t, src) // the last batch cut off
	lastB := all[len(all)-1]
	patchFile(t, filepath.Join(dir, filepath.Base(lastB.file)), func(d []byte) []byte { return d[:lastB.pos] })
	l := openLog(t, dir, opts)
	var ce *CorruptionError
	if !errors.As(l.Damage(), &ce) || ce.Offset != lastB.base || l.Next() != lastB.base {
		t.Fatalf("last batch gone: damage %v, next %d", l.Damage(), l.Next())
	}
	checkContents(t, l)

	dir = copyDir(t, src) // the last segment gone
	os.Remove(filepath.Join(dir, filepath.Base(files[len(files)-1])))
	l = openLog(t, dir, opts)
	if !errors.As(l.Damage(), &ce) || ce.Offset != segmentBase(t, files[len(files)-1]) {
		t.Fatalf("last segment gone: damage %v", l.Damage())
	}
	checkContents(t, l)

	dir = copyDir(t, src) // every segment gone
	for _, f := range files {
		os.Remove(filepath.Join(dir, filepath.Base(f)))
	}
	if _, err := Open(dir, opts); !errors.Is(err, ErrDamaged) {
		t.Fatalf("open of a directory that lost every segment: %v", err)
	}
}

func segmentBase(t *testing.T, path string) int64 {
	t.Helper()
	kind, base := parseName(filepath.Base(path))
	if kind != kindLog {
		t.Fatalf("%s is not a segment", path)
	}
	return base
}

// TestRecoveryScansEverySegmentAboveTheRecoveryPoint: with the recovery point in an
// older segment (a crash after several rolls), recovery checks every segment from the
// one holding the point. Bad data above the point in the last segment is a torn tail,
// cut there; above the point in a segment that has a successor it is damage (a roll made
// that segment whole: a hostile test lost 1500 acknowledged records when it was cut);
// bad data at or below the point in a scanned segment opens the log damaged; bad data in
// a segment below the scan is not read at open, and fails its reads.
func TestRecoveryScansEverySegmentAboveTheRecoveryPoint(t *testing.T) {
	src := t.TempDir()
	opts := Options{SegmentBytes: 8 << 10, Sync: SyncNever}
	buildLog(t, src, opts, 600)
	all := layout(t, src)
	files, _ := filepath.Glob(filepath.Join(src, "*.log"))
	if len(files) < 8 {
		t.Fatalf("%d segments", len(files))
	}
	in := func(f string) []batchAt {
		var out []batchAt
		for _, b := range all {
			if b.file == f {
				out = append(out, b)
			}
		}
		return out
	}
	rpSeg := in(files[2])
	r := rpSeg[len(rpSeg)/2].last // in the middle of the third segment

	flip := func(dir string, b batchAt) {
		patchFile(t, filepath.Join(dir, filepath.Base(b.file)), func(d []byte) []byte { d[b.pos+40] ^= 1; return d })
	}
	t.Run("torn above", func(t *testing.T) {
		dir := copyDir(t, src)
		setRecoveryPoint(t, dir, r)
		lastSeg := in(files[len(files)-1])
		bad := lastSeg[len(lastSeg)/2]
		flip(dir, bad)
		l := openLog(t, dir, opts)
		if l.Damage() != nil || l.Next() != bad.base {
			t.Fatalf("damage %v, next %d, want %d", l.Damage(), l.Next(), bad.base)
		}
		left, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		if len(left) != len(files) {
			t.Fatalf("%d segments left, want %d", len(left), len(files))
		}
		checkContents(t, l)
		appendN(t, l, 30) // and the log goes on, rolling past the cut
		checkContents(t, l)
	})
	t.Run("above in a sealed segment", func(t *testing.T) {
		dir := copyDir(t, src)
		setRecoveryPoint(t, dir, r)
		bad := in(files[5])[3]
		flip(dir, bad)
		l := openLog(t, dir, opts)
		var ce *CorruptionError
		if !errors.As(l.Damage(), &ce) || ce.Offset != bad.base || l.Next() != bad.base {
			t.Fatalf("damage %v, next %d, want damage at %d", l.Damage(), l.Next(), bad.base)
		}
		left, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		if len(left) != len(files) {
			t.Fatalf("%d segments left, want all %d: nothing is cut", len(left), len(files))
		}
	})
	t.Run("damage in the scan", func(t *testing.T) {
		dir := copyDir(t, src)
		setRecoveryPoint(t, dir, r)
		bad := rpSeg[2] // below the point, in the segment holding it
		flip(dir, bad)
		l := openLog(t, dir, opts)
		var ce *CorruptionError
		if !errors.As(l.Damage(), &ce) || ce.Offset != bad.base || l.Next() != bad.base {
			t.Fatalf("damage %v, next %d, want %d", l.Damage(), l.Next(), bad.base)
		}
		left, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		if len(left) != len(files) {
			t.Fatalf("a damaged open deleted segments: %d of %d left", len(left), len(files))
		}
		checkContents(t, l)
	})
	t.Run("below the scan", func(t *testing.T) {
		dir := copyDir(t, src)
		setRecoveryPoint(t, dir, r)
		bad := in(files[1])[4]
		patchFile(t, filepath.Join(dir, filepath.Base(bad.file)), func(d []byte) []byte { d[bad.pos+2] ^= 1; return d })
		l := openLog(t, dir, opts)
		if l.Damage() != nil || l.Next() != all[len(all)-1].last+1 {
			t.Fatalf("damage %v, next %d", l.Damage(), l.Next())
		}
		var ce *CorruptionError
		if _, err := l.ReadRegion(bad.base, 1); !errors.As(err, &ce) || ce.Offset != bad.base {
			t.Fatalf("read of the bad batch: %v", err)
		}
	})
}

// TestTruncateLowersRecoveryPoint: Truncate below the recovery point lowers it before it
// cuts, so the next open finds no acknowledged data missing.
func TestTruncateLowersRecoveryPoint(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 4 << 10, Sync: SyncEveryBatch}
	l := openLog(t, dir, opts)
	appendN(t, l, 200)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, opts)
	var last int64
	if err := l.WalkHeaders(0, func(h batch.Header) bool { last = h.LastOffset(); return h.LastOffset() < 300 }); err != nil {
		t.Fatal(err)
	}
	if err := l.Truncate(last); err != nil {
		t.Fatal(err)
	}
	if rp := readRP(t, dir); rp.Offset != last {
		t.Fatalf("recovery point %+v after truncating to %d", rp, last)
	}
	l.Close()
	l = openLog(t, dir, opts)
	if l.Damage() != nil || l.Next() != last+1 {
		t.Fatalf("reopened: damage %v, next %d, want %d", l.Damage(), l.Next(), last+1)
	}
	checkContents(t, l)
}

// TestDamagedLogReaders: in a damaged log, WalkHeaders delivers every header below the
// damage and then returns it; OffsetForTime answers within the readable range; Stats,
// and Pending work; Persist refuses.
func TestDamagedLogReaders(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 8 << 10, Sync: SyncNever}
	buildLog(t, dir, opts, 300)
	all := layout(t, dir)
	bad := all[len(all)-5]
	patchFile(t, bad.file, func(d []byte) []byte { d[bad.pos+50] ^= 1; return d })
	rpBefore, _ := os.ReadFile(filepath.Join(dir, recoveryPointName))
	l := openLog(t, dir, opts)
	var ce *CorruptionError
	if !errors.As(l.Damage(), &ce) || ce.Offset != bad.base {
		t.Fatalf("damage %v", l.Damage())
	}
	var got []int64
	err := l.WalkHeaders(0, func(h batch.Header) bool { got = append(got, h.BaseOffset); return true })
	if !errors.As(err, &ce) || ce.Offset != bad.base || len(got) != len(all)-5 {
		t.Fatalf("walk: %d headers, %v", len(got), err)
	}
	if o, err := l.OffsetForTime(tsAt(all[10].base)); err != nil || o != all[10].base {
		t.Fatalf("offset for time: %d %v", o, err)
	}
	if o, err := l.OffsetForTime(tsAt(bad.base + 1000)); err != nil || o != bad.base {
		t.Fatalf("offset for a time past the damage: %d %v", o, err)
	}
	if s := stats(t, l); s.Next != bad.base || s.Durable != bad.base-1 {
		t.Fatalf("stats %+v", s)
	}
	if l.Pending() != 0 || l.DirectIO() {
		t.Fatalf("pending %d, direct %v in a log that writes nothing", l.Pending(), l.DirectIO())
	}
	if _, err := l.Persist(NewMemSource()); !errors.Is(err, ErrDamaged) {
		t.Fatalf("persist of a damaged log: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if rpAfter, _ := os.ReadFile(filepath.Join(dir, recoveryPointName)); !bytes.Equal(rpAfter, rpBefore) {
		t.Fatal("a damaged log rewrote its recovery point")
	}
}

// TestSyncNeverCrashScansTheActiveSegmentOnly: under SyncNever the recovery point moves
// over each segment sealed (recordSealed), so after a crash (the directory copied while
// the log is open: what a killed process leaves) recovery scans the active segment
// alone. A bit flipped in a sealed segment is not read at open: it would be damage in a
// scan (a segment with a successor), which refuses writes until an operator repairs
// the log, and without the record the scan would cover every segment written since the
// last clean Close. One flipped in the active segment is a torn tail, cut.
func TestSyncNeverCrashScansTheActiveSegmentOnly(t *testing.T) {
	src := t.TempDir()
	opts := Options{SegmentBytes: 8 << 10, Sync: SyncNever}
	l := openLog(t, src, opts)
	appendN(t, l, 300)
	crashed := copyDir(t, src) // no Close: no clean record, the active segment unsynced
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(crashed, "*.log"))
	if len(files) < 4 {
		t.Fatalf("%d segments", len(files))
	}
	sort.Strings(files)
	active := segmentBase(t, files[len(files)-1])
	if rp := readRP(t, crashed); rp.Clean || rp.Offset != active-1 {
		t.Fatalf("recovery point %+v after the crash, want the end of the last sealed segment, %d", rp, active-1)
	}
	all := layout(t, crashed)
	var sealed, tail []batchAt
	for _, b := range all {
		switch filepath.Base(b.file) {
		case filepath.Base(files[1]):
			sealed = append(sealed, b)
		case filepath.Base(files[len(files)-1]):
			tail = append(tail, b)
		}
	}
	if len(sealed) < 3 || len(tail) < 3 {
		t.Fatalf("%d batches in the second segment, %d in the active one", len(sealed), len(tail))
	}
	for _, b := range []batchAt{sealed[1], tail[len(tail)/2]} {
		patchFile(t, filepath.Join(crashed, filepath.Base(b.file)), func(d []byte) []byte { d[b.pos+40] ^= 1; return d })
	}
	l = openLog(t, crashed, opts)
	if l.Damage() != nil || l.Next() != tail[len(tail)/2].base {
		t.Fatalf("damage %v, next %d: want no damage (the sealed segment is not scanned) and the torn tail cut at %d",
			l.Damage(), l.Next(), tail[len(tail)/2].base)
	}
	if rp := readRP(t, crashed); rp.Offset != l.Next()-1 {
		t.Fatalf("recovery point %+v after the recovery, want the recovered end %d (Open fsyncs it under SyncNever too)", rp, l.Next()-1)
	}
}
