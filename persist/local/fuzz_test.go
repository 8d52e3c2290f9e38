package local

import (
	"os"
	"path/filepath"
	"testing"

	"sluice/batch"
)

// validLogBytes returns the bytes of a segment holding n deterministic batches from 0.
func validLogBytes(n int) []byte {
	var b []byte
	o := int64(0)
	for range n {
		mb := makeBatch(o)
		batch.SetBaseOffset(mb, o)
		b = append(b, mb...)
		o += int64(countAt(o))
	}
	return b
}

// FuzzRecover opens a partition whose last segment holds arbitrary bytes. Open must not
// panic; when it succeeds, the log holds only whole valid batches with dense offsets, can
// be appended to, and reopens to the same end.
func FuzzRecover(f *testing.F) {
	valid := validLogBytes(6)
	f.Add(valid)
	f.Add(valid[:len(valid)-3])
	f.Add(valid[:batch.HeaderSize+2])
	f.Add([]byte{})
	f.Add(make([]byte, 100))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		opts := Options{Sync: SyncNever, IndexInterval: 64}
		l, err := Open(dir, opts)
		if err != nil {
			return // a clear error is an acceptable answer to garbage
		}
		defer l.Close()
		checkBatches(t, l)
		if _, err := l.Append(makeBatch(l.Next())); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
		next := l.Next()
		l.Close()
		l2, err := Open(dir, opts)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer l2.Close()
		if l2.Next() != next {
			t.Fatalf("reopened at %d, want %d", l2.Next(), next)
		}
		checkBatches(t, l2)
	})
}

// FuzzIndexFiles gives a sealed segment arbitrary index files. The .log is valid, so
// every lookup must still be exact: bad index files are detected and rebuilt.
func FuzzIndexFiles(f *testing.F) {
	src := f.TempDir()
	opts := Options{SegmentBytes: 4 << 10, IndexInterval: 200, Sync: SyncNever}
	l, err := Open(src, opts)
	if err != nil {
		f.Fatal(err)
	}
	appendN(f, l, 60)
	l.Close()
	base := filepath.Join(src, "00000000000000000000")
	idx, _ := os.ReadFile(base + ".index")
	tidx, _ := os.ReadFile(base + ".timeindex")
	f.Add(idx, tidx)
	f.Add(idx[:len(idx)-12], tidx[:len(tidx)-16])
	f.Add([]byte{}, []byte{1})
	f.Fuzz(func(t *testing.T, idxData, tidxData []byte) {
		dir := copyDir(t, src)
		name := filepath.Join(dir, "00000000000000000000")
		os.WriteFile(name+".index", idxData, 0o644)
		os.WriteFile(name+".timeindex", tidxData, 0o644)
		l := openLog(t, dir, opts)
		checkContents(t, l)
		for o := l.Start(); o < l.Next(); o++ {
			got, err := l.OffsetForTime(tsAt(o))
			r, rerr := l.ReadRegion(o, 1)
			if err != nil || rerr != nil || got != r.Offset {
				t.Fatalf("offset %d: time lookup %d (%v), region at %d (%v)", o, got, err, r.Offset, rerr)
			}
			r.Release()
		}
	})
}

// checkBatches reads the whole log and checks every batch and the offset continuity.
func checkBatches(t *testing.T, l *Log) {
	t.Helper()
	var buf []byte
	for off := l.Start(); off < l.Next(); {
		var next int64
		var err error
		buf, next, err = l.Read(buf[:0], off, 1<<20)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		for rest := buf; len(rest) > 0; {
			h, err := batch.Check(rest)
			if err != nil || h.BaseOffset != off {
				t.Fatalf("batch at %d: base %d, %v", off, h.BaseOffset, err)
			}
			var it batch.Iter
			if err := it.Reset(rest[:h.Size()]); err != nil {
				t.Fatalf("batch at %d: %v", off, err)
			}
			for it.Next() {
			}
			// Records that do not decode are the consumer's problem to report, not a
			// reason for recovery to cut the log: the CRC says the bytes are as written.
			off, rest = h.LastOffset()+1, rest[h.Size():]
		}
		if off != next {
			t.Fatalf("region ended at %d, batches at %d", next, off)
		}
	}
}
