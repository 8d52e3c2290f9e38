package local

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
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
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)
	}
	return dst
}

// TestTornTail cuts the last segment at every byte inside its final batch, and flips
// every byte of that batch in turn; each time the reopened log must be exactly the
// valid prefix: every batch but the last.
func TestTornTail(t *testing.T) {
	src := t.TempDir()
	opts := Options{SegmentBytes: 8 << 10, Sync: SyncNever}
	bases := buildLog(t, src, opts, 120)
	seg := lastSegment(t, src)
	data, _ := os.ReadFile(seg)
	lastLen := len(makeBatch(bases[len(bases)-2]))
	start := len(data) - lastLen
	wantNext := bases[len(bases)-2]

	check := func(name string, mutate func(b []byte) []byte) {
		t.Helper()
		dir := copyDir(t, src)
		path := filepath.Join(dir, filepath.Base(seg))
		os.WriteFile(path, mutate(append([]byte(nil), data...)), 0o644)
		l, err := Open(dir, opts)
		if err != nil {
			t.Fatalf("%s: open: %v", name, err)
		}
		defer l.Close()
		if l.Next() != wantNext {
			t.Fatalf("%s: next %d, want %d", name, l.Next(), wantNext)
		}
		if fi, _ := os.Stat(path); fi.Size() != int64(start) {
			t.Fatalf("%s: segment is %d bytes, want %d", name, fi.Size(), start)
		}
		checkContents(t, l)
		appendN(t, l, 2) // and the log goes on
		checkContents(t, l)
	}
	for cut := start; cut < len(data); cut++ {
		check("cut", func(b []byte) []byte { return b[:cut] })
	}
	for i := start + 8; i < len(data); i++ { // bytes 0-7 (the base offset) are checked by continuity
		check("flip", func(b []byte) []byte { b[i] ^= 0x5a; return b })
	}
	for i := start; i < start+8; i++ {
		check("offset", func(b []byte) []byte { b[i] ^= 0x01; return b })
	}
	check("garbage appended", func(b []byte) []byte { return append(b[:start], make([]byte, 100)...) })
}

// TestCorruptMiddleOfLastSegment: a bad batch in the middle of the last segment cuts the
// log there (what follows cannot be trusted to be contiguous).
func TestCorruptMiddleOfLastSegment(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Sync: SyncNever}
	bases := buildLog(t, dir, opts, 50)
	seg := lastSegment(t, dir)
	data, _ := os.ReadFile(seg)
	pos := 0
	for i := range 20 {
		pos += len(makeBatch(bases[i]))
	}
	data[pos+30] ^= 0xff
	os.WriteFile(seg, data, 0o644)
	l := openLog(t, dir, opts)
	if l.Next() != bases[20] {
		t.Fatalf("next %d, want %d", l.Next(), bases[20])
	}
	checkContents(t, l)
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
