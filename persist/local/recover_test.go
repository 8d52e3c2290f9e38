package local

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sluice/persist/vfs"
)

// buildLog writes n batches into a fresh log in dir and returns the offsets at which each
// batch starts, plus the end.
func buildLog(t *testing.T, dir string, opts Options, n int) []int64 {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	bases := []int64{0}
	for range n {
		bases = append(bases, appendN(t, l, 1))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return bases
}

// lastSegment returns the path of the newest .log file in dir.
func lastSegment(t *testing.T, dir string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(files) == 0 {
		t.Fatal("no segments")
	}
	return files[len(files)-1]
}

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, _ := os.ReadDir(src)
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && fi.Size() > 64<<20 {
			t.Fatalf("copyDir of %s (%d bytes): use smaller segments (active segments are preallocated)", e.Name(), fi.Size())
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)
	}
	return dst
}

// setRecoveryPoint replaces dir's recovery point with one at r, as if the log had
// crashed after recording r: what lies above r is then a tail that recovery may cut.
func setRecoveryPoint(t *testing.T, dir string, r int64) {
	t.Helper()
	if err := writeRecoveryPoint(vfs.Default(), dir, RecoveryPoint{Offset: r}); err != nil {
		t.Fatal(err)
	}
}

// TestTornTail cuts the last segment at every byte inside its final batch, and flips
// every byte of that batch in turn, with the recovery point below that batch (a crash
// before it was recorded); each time the reopened log must be exactly the valid prefix:
// every batch but the last, with the file holding nothing but zeros after it (cut and
// preallocated again). Flips in the zeros after the data (the last block's padding, the
// preallocated space) are not data: they lose nothing.
func TestTornTail(t *testing.T) {
	src := t.TempDir()
	opts := Options{SegmentBytes: 8 << 10, Sync: SyncNever}
	bases := buildLog(t, src, opts, 120)
	setRecoveryPoint(t, src, bases[len(bases)-2]-1)
	seg := lastSegment(t, src)
	data, _ := os.ReadFile(seg)
	all := layout(t, src)
	end := int(all[len(all)-1].pos + all[len(all)-1].size)
	start := int(all[len(all)-1].pos)
	if !allZero(data[end:]) || len(data) != int(opts.SegmentBytes) {
		t.Fatalf("the last segment is %d bytes, data to %d: not preallocated to zeros", len(data), end)
	}

	check := func(name string, wantNext int64, wantEnd int, mutate func(b []byte) []byte) {
		t.Helper()
		dir := copyDir(t, src)
		path := filepath.Join(dir, filepath.Base(seg))
		os.WriteFile(path, mutate(append([]byte(nil), data...)), 0o644)
		l, err := Open(dir, opts)
		if err != nil {
			t.Fatalf("%s: open: %v", name, err)
		}
		defer l.Close()
		if l.Next() != wantNext || l.Damage() != nil {
			t.Fatalf("%s: next %d (damage %v), want %d", name, l.Next(), l.Damage(), wantNext)
		}
		if _, pos := l.Tail(); pos != int64(wantEnd) {
			t.Fatalf("%s: tail at %d, want %d", name, pos, wantEnd)
		}
		if b, _ := os.ReadFile(path); len(b) < wantEnd || !allZero(b[wantEnd:]) {
			t.Fatalf("%s: the segment holds more than zeros after its data at %d", name, wantEnd)
		}
		checkContents(t, l)
		appendN(t, l, 2) // and the log goes on
		checkContents(t, l)
	}
	prefix := bases[len(bases)-2]
	for cut := start; cut < end; cut++ {
		check("cut", prefix, start, func(b []byte) []byte { return b[:cut] })
	}
	for i := start + 8; i < end; i++ { // bytes 0-7 (the base offset) are checked by continuity
		check("flip", prefix, start, func(b []byte) []byte { b[i] ^= 0x5a; return b })
	}
	for i := start; i < start+8; i++ {
		check("offset", prefix, start, func(b []byte) []byte { b[i] ^= 0x01; return b })
	}
	check("zeros instead of the last batch", prefix, start, func(b []byte) []byte { clear(b[start:end]); return b })
	check("garbage after the zeros", prefix, start, func(b []byte) []byte {
		clear(b[start:end]) // a torn write: the block with the batch lost, a later one written
		b[min(end+Block, len(b)-1)] = 0x77
		return b
	})
	for _, i := range []int{end, end + 1, end + batchHeaderSize - 1, end + batchHeaderSize, Block, len(data) - 1} {
		if i < end || i >= len(data) {
			continue
		}
		check("flip in the padding", bases[len(bases)-1], end, func(b []byte) []byte { b[i] ^= 0x10; return b })
	}
	check("file cut at the end of the data", bases[len(bases)-1], end, func(b []byte) []byte { return b[:end] })
}

// batchHeaderSize is batch.HeaderSize as an int.
const batchHeaderSize = 56

// TestCorruptMiddleOfLastSegment: a bad batch in the middle of the last segment is a
// torn tail, cut there (what follows cannot be trusted to be contiguous), only when it
// lies above the recovery point or there is none; at or below it, it is damage and
// nothing is cut.
func TestCorruptMiddleOfLastSegment(t *testing.T) {
	src := t.TempDir()
	opts := Options{Sync: SyncNever, SegmentBytes: 64 << 10}
	bases := buildLog(t, src, opts, 50)
	pos := 0
	for i := range 20 {
		pos += len(makeBatch(bases[i]))
	}
	for _, c := range []struct {
		name   string
		rp     int64 // -2: no recovery point
		damage bool
	}{
		{"recovery point at the end", bases[50] - 1, true},
		{"recovery point on the bad batch", bases[21] - 1, true},
		{"recovery point just below the bad batch", bases[20] - 1, false},
		{"recovery point far below", bases[3] - 1, false},
		{"no recovery point", -2, false},
	} {
		dir := copyDir(t, src)
		if c.rp == -2 {
			os.Remove(filepath.Join(dir, recoveryPointName))
		} else {
			setRecoveryPoint(t, dir, c.rp)
		}
		seg := lastSegment(t, dir)
		patchFile(t, seg, func(d []byte) []byte { d[pos+30] ^= 0xff; return d })
		before, _ := os.ReadFile(seg)
		l := openLog(t, dir, opts)
		if l.Next() != bases[20] {
			t.Fatalf("%s: next %d, want %d", c.name, l.Next(), bases[20])
		}
		var ce *CorruptionError
		if damaged := errors.As(l.Damage(), &ce); damaged != c.damage || damaged && ce.Offset != bases[20] {
			t.Fatalf("%s: damage %v, want damaged=%v", c.name, l.Damage(), c.damage)
		}
		if after, _ := os.ReadFile(seg); c.damage != bytes.Equal(after, before) || !c.damage && !allZero(after[pos:]) {
			t.Fatalf("%s: damaged=%v, and the segment changed: %v, or holds more than zeros after %d", c.name, c.damage, !bytes.Equal(after, before), pos)
		}
		checkContents(t, l)
		l.Close()
	}
}

// TestCorruptOlderSegment: corruption in a sealed segment is not repaired or skipped; it is
// reported, naming file and position, when the data is read.
func TestCorruptOlderSegment(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 4 << 10, Sync: SyncNever}
	bases := buildLog(t, dir, opts, 200)
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	first := files[0]
	data, _ := os.ReadFile(first)
	// Corrupt the header of the third batch (its record count) so lookups past it fail.
	pos := len(makeBatch(bases[0])) + len(makeBatch(bases[1]))
	data[pos+20] = 0
	os.WriteFile(first, data, 0o644)
	os.Remove(first[:len(first)-len(".log")] + ".index") // force a verifying rebuild

	l := openLog(t, dir, opts) // opening does not read old segments
	_, err := l.ReadRegion(bases[3], 100)
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.File != first || ce.Pos != int64(pos) {
		t.Fatalf("read of a corrupt segment: %v", err)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatal("not ErrCorrupt")
	}
	// Data in healthy segments is still served.
	r, err := l.ReadRegion(l.Next()-1, 100)
	if err != nil {
		t.Fatalf("healthy segment: %v", err)
	}
	r.Release()
}

// TestIndexRebuild: a missing, truncated or wrong index of a sealed segment is rebuilt from
// the .log and lookups stay exact.
func TestIndexRebuild(t *testing.T) {
	opts := Options{SegmentBytes: 4 << 10, IndexInterval: 300, Sync: SyncNever}
	src := t.TempDir()
	buildLog(t, src, opts, 300)
	idxs, _ := filepath.Glob(filepath.Join(src, "*.index"))
	tidxs, _ := filepath.Glob(filepath.Join(src, "*.timeindex"))
	if len(idxs) < 3 || len(tidxs) != len(idxs) {
		t.Fatalf("%d index files, %d time index files", len(idxs), len(tidxs))
	}
	for name, mutate := range map[string]func(path string){
		"missing":   func(p string) { os.Remove(p) },
		"truncated": func(p string) { b, _ := os.ReadFile(p); os.WriteFile(p, b[:len(b)-5], 0o644) },
		"empty":     func(p string) { os.WriteFile(p, nil, 0o644) },
		"foreign":   func(p string) { b, _ := os.ReadFile(tidxs[0]); os.WriteFile(p, b[:24], 0o644) },
		"shifted": func(p string) {
			b, _ := os.ReadFile(p)
			b[len(b)-16]++ // last entry's relative offset no longer matches its batch
			os.WriteFile(p, b, 0o644)
		},
	} {
		dir := copyDir(t, src)
		mutate(filepath.Join(dir, filepath.Base(idxs[1])))
		mutate(filepath.Join(dir, filepath.Base(tidxs[2])))
		l := openLog(t, dir, opts)
		checkContents(t, l)
		for o := l.Start(); o < l.Next(); o++ {
			got, err := l.OffsetForTime(tsAt(o))
			if err != nil {
				t.Fatalf("%s: time %d: %v", name, o, err)
			}
			r, _ := l.ReadRegion(o, 1)
			if got != r.Offset {
				t.Fatalf("%s: offset for time of %d = %d, want %d", name, o, got, r.Offset)
			}
			r.Release()
		}
		l.Close()
	}
}

// TestEmptyAndTinyFiles: a zero-length or header-less last segment opens as empty.
func TestEmptyAndTinyFiles(t *testing.T) {
	for _, size := range []int{0, 1, 11, 55} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "00000000000000000042.log"), make([]byte, size), 0o644)
		l := openLog(t, dir, Options{})
		if l.Start() != 42 || l.Next() != 42 {
			t.Fatalf("size %d: start %d next %d", size, l.Start(), l.Next())
		}
		appendN(t, l, 3)
		checkContents(t, l)
	}
}

// TestFlippedBitAfterCleanStopIsDamage is the review's case: 20 batches of 500 persisted
// records, a clean stop, one bit flipped at byte 20000 of the segment. The data is below
// the recovery point written at Close, so the log opens damaged at the batch holding that
// byte: nothing is cut, what is below is served, what is at or past it fails with the
// corruption, writes fail with ErrDamaged, and the damage is reported once.
func TestFlippedBitAfterCleanStopIsDamage(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Sync: SyncEveryBatch, SegmentBytes: 4 << 20}
	l := openLog(t, dir, opts)
	var bases, sizes []int64
	src := NewMemSource()
	for i := range 20 {
		b := makeRecords(int64(i*500), 500)
		p, err := src.Append(l, b, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Persist(src); err != nil {
			t.Fatal(err)
		}
		bases, sizes = append(bases, p.Base), append(sizes, int64(len(b)))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	seg := lastSegment(t, dir)
	data, _ := os.ReadFile(seg)
	data[20000] ^= 0x10
	os.WriteFile(seg, data, 0o644)
	hit, pos := 0, int64(0) // the batch holding byte 20000
	for pos+sizes[hit] <= 20000 {
		pos += sizes[hit]
		hit++
	}
	want := bases[hit]

	rec := &logRecorder{}
	l = openLog(t, dir, Options{Sync: SyncEveryBatch, SegmentBytes: 4 << 20, RetentionBytes: 1, Logger: rec.logger()})
	var ce *CorruptionError
	if err := l.Damage(); !errors.As(err, &ce) || ce.Offset != want || ce.Pos != pos || ce.File != seg {
		t.Fatalf("damage %v, want a corruption at offset %d, position %d of %s", err, want, pos, seg)
	}
	if start, next := l.Bounds(); start != 0 || next != want || l.Next() != want {
		t.Fatalf("bounds [%d, %d), want [0, %d)", start, next, want)
	}
	for i := range hit { // below the damage: served
		var buf []byte
		buf, _, err := l.Read(buf, bases[i], 1)
		if err != nil || !bytes.Equal(buf[8:], makeRecords(bases[i], 500)[8:]) {
			t.Fatalf("batch %d below the damage: %v", bases[i], err)
		}
	}
	for _, o := range []int64{want, want + 1, want + 700, bases[19] + 499} { // at or past it: the corruption
		if _, err := l.ReadRegion(o, 1<<20); !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.Offset != want {
			t.Fatalf("read at %d: %v, want the damage", o, err)
		}
	}
	if _, err := src.Append(l, makeRecords(want, 1), time.Now()); !errors.Is(err, ErrDamaged) {
		t.Fatalf("place in a damaged log: %v", err)
	}
	if err := l.Truncate(bases[1] - 1); !errors.Is(err, ErrDamaged) {
		t.Fatalf("truncate of a damaged log: %v", err)
	}
	if _, err := l.ApplyRetention(want); !errors.Is(err, ErrDamaged) {
		t.Fatalf("retention on a damaged log: %v", err)
	}
	if n := rec.count(slog.LevelError, "damaged"); n != 1 {
		t.Fatalf("the damage was reported %d times, want once", n)
	}
	l.Close()
	if after, _ := os.ReadFile(seg); !bytes.Equal(after, data) {
		t.Fatal("a damaged log changed its segment")
	}
	l = openLog(t, dir, opts)
	if err := l.Damage(); !errors.As(err, &ce) || ce.Offset != want {
		t.Fatalf("reopened: damage %v", err)
	}
}

// TestNoRecoveryPointScansSealedSegments: without a recovery point (a partition's first
// 30 s, or an unreadable record) bad data in a sealed segment is damage found at open,
// as `sluice segment verify` calls it, not trusted unread and served (a review found a
// young partition serving a flipped bit, which stopped its consumers at the CRC).
func TestNoRecoveryPointScansSealedSegments(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Sync: SyncNever, SegmentBytes: 4 << 10}
	bases := buildLog(t, dir, opts, 200)
	os.Remove(filepath.Join(dir, recoveryPointName))
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(files) < 3 {
		t.Fatalf("%d segments: the test needs sealed ones", len(files))
	}
	pos := len(makeBatch(bases[0]))
	patchFile(t, files[0], func(d []byte) []byte { d[pos+30] ^= 0xff; return d })
	l := openLog(t, dir, opts)
	defer l.Close()
	var ce *CorruptionError
	if !errors.As(l.Damage(), &ce) || ce.Offset != bases[1] || ce.File != files[0] {
		t.Fatalf("damage %v, want the second batch (offset %d) of %s", l.Damage(), bases[1], files[0])
	}
}
