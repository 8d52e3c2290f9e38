package local

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sluice/batch"
	"sluice/persist/vfs"
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
	padded := append(append([]byte(nil), valid...), make([]byte, 3*Block-len(valid)%Block)...)
	f.Add(valid)
	f.Add(valid[:len(valid)-3])
	f.Add(valid[:batch.HeaderSize+2])
	f.Add([]byte{})
	f.Add(make([]byte, 100))
	f.Add(padded) // preallocated: zeros after the data
	flipped := append([]byte(nil), padded...)
	flipped[len(valid)+9] ^= 4 // a bit flipped in the padding, where a header would be
	f.Add(flipped)
	flipped = append([]byte(nil), padded...)
	flipped[len(flipped)-5] ^= 1 // and in the preallocated space further on
	f.Add(flipped)
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		opts := Options{Sync: SyncNever, IndexInterval: 64, SegmentBytes: 64 << 10, FS: noSyncFS{vfs.Default()}}
		l, err := Open(dir, opts)
		if err != nil {
			return // a clear error is an acceptable answer to garbage
		}
		defer l.Close()
		checkBatches(t, l)
		// The buffer starts where the data ends, and the file holds nothing after it:
		// whatever followed (a torn tail, a flipped bit in the padding) is cut and the
		// space preallocated again, zeros.
		tseg, pos := l.Tail()
		if tseg != 0 || pos != activeSize(l) {
			t.Fatalf("tail (%d, %d) after recovery, the active segment holds %d bytes", tseg, pos, activeSize(l))
		}
		if b, err := os.ReadFile(filepath.Join(dir, "00000000000000000000.log")); err != nil || !allZero(b[pos:]) {
			t.Fatalf("after recovery the file holds more than zeros after the data at %d (%v)", pos, err)
		}
		src := NewMemSource()
		if _, err := src.Append(l, makeBatch(l.Next()), time.Now()); err != nil {
			t.Fatalf("place after recovery: %v", err)
		}
		if _, err := l.Persist(src); err != nil {
			t.Fatalf("persist after recovery: %v", err)
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
	opts := Options{SegmentBytes: 4 << 10, IndexInterval: 200, Sync: SyncNever, FS: noSyncFS{vfs.Default()}}
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

// noSyncFS is the real filesystem with fsync turned into a no-op: fuzz targets open and
// close logs thousands of times, and Close fsyncs. Durability is not what they test.
type noSyncFS struct{ vfs.FS }

type noSyncFile struct{ vfs.File }

func (noSyncFile) Sync() error     { return nil }
func (noSyncFile) Datasync() error { return nil }

func (fs noSyncFS) Create(name string) (vfs.File, error) { return wrapNoSync(fs.FS.Create(name)) }
func (fs noSyncFS) Open(name string) (vfs.File, error)   { return wrapNoSync(fs.FS.Open(name)) }
func (fs noSyncFS) OpenReadWrite(name string) (vfs.File, error) {
	return wrapNoSync(fs.FS.OpenReadWrite(name))
}
func (noSyncFS) SyncDir(string) error { return nil }
func (fs noSyncFS) OpenDirect(name string, create bool) (vfs.File, bool, error) {
	f, direct, err := fs.FS.OpenDirect(name, create)
	f, err = wrapNoSync(f, err)
	return f, direct, err
}

func wrapNoSync(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

// fuzzPartition is the partition directory FuzzOpenCorrupt damages: sealed segments with
// their index files, an active segment, and a recovery point in the middle of the
// second-to-last segment (so the last two segments are scanned at open and the others
// trusted). Built once per fuzzing process, in the target's temporary directory.
type fuzzPartition struct {
	src   string
	names []string          // every file, sorted
	data  map[string][]byte // their bytes
	bases []int64           // segment base offsets
	end   int64             // the offset after the last batch
	rp    int64
	all   []batchAt // every batch, by offset
}

func fuzzOpts() Options {
	return Options{SegmentBytes: 4 << 10, IndexInterval: 512, Sync: SyncNever, FS: noSyncFS{vfs.Default()}, Files: NewFilePool(4)}
}

func buildFuzzPartition(src string) (*fuzzPartition, error) {
	l, err := Open(src, fuzzOpts())
	if err != nil {
		return nil, err
	}
	p := &fuzzPartition{src: src, data: map[string][]byte{}}
	ms := NewMemSource()
	for o, n := int64(0), 0; n < 160; o, n = o+int64(countAt(o)), n+1 {
		if _, err := ms.Append(l, makeBatch(o), time.Now()); err != nil {
			return nil, err
		}
		if n%7 == 0 {
			if _, err := l.Persist(ms); err != nil {
				return nil, err
			}
		}
	}
	if _, err := l.Persist(ms); err != nil {
		return nil, err
	}
	if err := l.Close(); err != nil {
		return nil, err
	}
	if _, err := Inspect(nil, src, func(b BatchInfo) {
		p.all = append(p.all, batchAt{file: filepath.Base(b.Segment), pos: b.Pos, size: int64(b.Header.Size()), base: b.Header.BaseOffset, last: b.Header.LastOffset()})
	}); err != nil {
		return nil, err
	}
	p.end = p.all[len(p.all)-1].last + 1
	names, _ := os.ReadDir(src)
	for _, e := range names {
		p.names = append(p.names, e.Name())
		if kind, base := parseName(e.Name()); kind == kindLog {
			p.bases = append(p.bases, base)
		}
	}
	if len(p.bases) < 5 {
		return nil, fmt.Errorf("fuzz partition has %d segments", len(p.bases))
	}
	var inSecondLast []batchAt
	for _, b := range p.all {
		if b.file == filepath.Base(segmentName(src, p.bases[len(p.bases)-2], logSuffix)) {
			inSecondLast = append(inSecondLast, b)
		}
	}
	p.rp = inSecondLast[len(inSecondLast)/2].last
	if err := writeRecoveryPoint(vfs.Default(), src, RecoveryPoint{Offset: p.rp}); err != nil {
		return nil, err
	}
	for _, n := range p.names {
		if p.data[n], err = os.ReadFile(filepath.Join(src, n)); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// batchAtPos returns the batch of the segment file name that holds byte pos (or starts
// there), in the original layout.
func (p *fuzzPartition) batchAtPos(name string, pos int64) (batchAt, bool) {
	for _, b := range p.all {
		if b.file == name && pos < b.pos+b.size {
			return b, true
		}
	}
	return batchAt{}, false
}

// expect predicts what Open makes of the damaged copy: the first bad position in each
// .log (-1: intact) and the recovery point file's bytes. It returns the log's end and
// whether it is damaged there.
func (p *fuzzPartition) expect(firstBad map[string]int64, rpData []byte) (next int64, damaged bool) {
	rp, reason := decodeRecoveryPoint(rpData)
	first := 0 // without a recovery point every segment is scanned
	if reason == "" {
		first = max(0, segmentIndex(p.bases, rp.Offset+1))
	}
	last := p.bases[len(p.bases)-1]
	for _, base := range p.bases[first:] {
		name := filepath.Base(segmentName(p.src, base, logSuffix))
		pos, ok := firstBad[name]
		if !ok {
			continue
		}
		b, found := p.batchAtPos(name, pos)
		if !found {
			continue // cut at the very end: nothing lost
		}
		// Only the last segment can have a torn tail; below the recovery point, or in a
		// segment with a successor, bad data is damage.
		return b.base, (reason == "" && b.base <= rp.Offset) || base != last
	}
	if reason == "" && p.end-1 < rp.Offset {
		return p.end, true
	}
	return p.end, false
}

// FuzzOpenCorrupt damages a partition directory (bit flips and truncations of any of
// its files: segments, index files, the recovery point) and opens it. It checks: no
// panic; the log ends exactly where the recovery rule says, damaged exactly when bad
// data lies at or below the recovery point of an intact record (never a silent cut of
// acknowledged data, never damage that is not there); reads from Start to Next serve
// dense offsets, each batch either byte for byte the one written there or one whose CRC
// fails in a file that was damaged, until a *CorruptionError with an offset; WalkHeaders,
// OffsetForTime and Stats report bad data only as such errors; a damaged log refuses
// appends and changes no segment; a healthy one appends and reopens to the same end.
func FuzzOpenCorrupt(f *testing.F) {
	p, err := buildFuzzPartition(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range fuzzOpenSeeds(p) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		dir := t.TempDir()
		files := map[string][]byte{}
		for _, n := range p.names {
			files[n] = append([]byte(nil), p.data[n]...)
		}
		budget := int64(1)
		if len(ops) > 0 {
			budget = int64(ops[0]) * 64
			ops = ops[1:]
		}
		for n := 0; len(ops) >= 6 && n < 8; n, ops = n+1, ops[6:] {
			name := p.names[int(ops[0])%len(p.names)]
			b := files[name]
			at := int64(binary.LittleEndian.Uint32(ops[2:]))
			switch ops[1] % 3 {
			case 0, 1: // flip one bit
				if len(b) == 0 {
					continue
				}
				b[at%int64(len(b))] ^= 1 << (ops[1] / 3 % 8)
			case 2: // cut the file short
				files[name] = b[:at%int64(len(b)+1)]
			}
		}
		for n, b := range files {
			if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		logBad := map[string]int64{} // the first byte of each .log that differs (or is gone)
		for n, b := range files {
			if kind, _ := parseName(n); kind == kindLog {
				if pos, differs := firstDiff(p.data[n], b); differs {
					logBad[n] = pos
				}
			}
		}
		wantNext, wantDamage := p.expect(logBad, files[recoveryPointName])

		opts := fuzzOpts()
		l, err := Open(dir, opts)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer l.Close()
		var ce *CorruptionError
		damaged := errors.As(l.Damage(), &ce)
		if l.Start() != p.bases[0] || l.Next() != wantNext || damaged != wantDamage {
			t.Fatalf("opened [%d, %d) damage %v; want [%d, %d) damaged=%v (first bad bytes %v)",
				l.Start(), l.Next(), l.Damage(), p.bases[0], wantNext, wantDamage, logBad)
		}
		if damaged && (ce.Offset != wantNext || wantNext != p.end && !isBad(logBad, ce.File)) {
			t.Fatalf("damage %v, want it at %d in a damaged file", ce, wantNext)
		}
		// A corruption error must name a damaged segment and an offset.
		checkErr := func(what string, err error) bool {
			t.Helper()
			if err == nil {
				return false
			}
			if !errors.As(err, &ce) || ce.Offset < 0 || !isBad(logBad, ce.File) {
				t.Fatalf("%s: %v is not a corruption with an offset in a damaged segment", what, err)
			}
			return true
		}
		readAllOffsets(t, l, p, logBad, budget, checkErr)
		i := 0
		err = l.WalkHeaders(l.Start(), func(h batch.Header) bool {
			if i >= len(p.all) || h.BaseOffset != p.all[i].base || h.LastOffset() != p.all[i].last {
				t.Fatalf("walk delivered %d..%d at step %d", h.BaseOffset, h.LastOffset(), i)
			}
			i++
			return true
		})
		checkErr("walk", err)
		for k := 0; k < len(p.all); k += 7 {
			o, err := l.OffsetForTime(tsAt(p.all[k].base))
			if !checkErr("time lookup", err) && (o < l.Start() || o > l.Next()) {
				t.Fatalf("offset for time %d = %d, outside [%d, %d]", tsAt(p.all[k].base), o, l.Start(), l.Next())
			}
		}
		if _, err := l.Stats(); err != nil {
			t.Fatalf("stats: %v", err)
		}
		src := NewMemSource()
		if damaged {
			if _, err := src.Append(l, makeBatch(l.Next()), time.Now()); !errors.Is(err, ErrDamaged) {
				t.Fatalf("place in a damaged log: %v", err)
			}
			if _, err := l.Persist(src); !errors.Is(err, ErrDamaged) {
				t.Fatalf("persist of a damaged log: %v", err)
			}
			l.Close()
			for n, b := range files {
				if kind, _ := parseName(n); kind == kindLog || kind == kindRecoveryPoint {
					if got, err := os.ReadFile(filepath.Join(dir, n)); err != nil || !bytes.Equal(got, b) {
						t.Fatalf("a damaged log changed %s (%v)", n, err)
					}
				}
			}
			return
		}
		if _, err := src.Append(l, makeBatch(l.Next()), time.Now()); err != nil {
			t.Fatalf("place: %v", err)
		}
		if _, err := l.Persist(src); err != nil {
			t.Fatalf("persist: %v", err)
		}
		next := l.Next()
		if err := l.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		l2, err := Open(dir, opts)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer l2.Close()
		if l2.Next() != next || l2.Damage() != nil {
			t.Fatalf("reopened at %d (damage %v), want %d", l2.Next(), l2.Damage(), next)
		}
	})
}

// fuzzOpenSeeds returns inputs for FuzzOpenCorrupt that reach each kind of damage: the
// first byte is the read budget / 64, then 6 bytes per change (file index, kind: 0 flips
// bit 0 and 2 cuts the file, position little-endian). testdata/fuzz/FuzzOpenCorrupt holds
// the same inputs.
func fuzzOpenSeeds(p *fuzzPartition) [][]byte {
	idx := func(name string) byte {
		for i, n := range p.names {
			if n == name {
				return byte(i)
			}
		}
		panic("BUG: no file " + name)
	}
	seg := func(i int, suffix string) string {
		return filepath.Base(segmentName("", p.bases[(i+len(p.bases))%len(p.bases)], suffix))
	}
	in := func(i int) []batchAt {
		var out []batchAt
		for _, b := range p.all {
			if b.file == seg(i, logSuffix) {
				out = append(out, b)
			}
		}
		return out
	}
	op := func(budget byte, file string, kind byte, at int64) []byte {
		b := []byte{budget, idx(file), kind, 0, 0, 0, 0}
		binary.LittleEndian.PutUint32(b[3:], uint32(at))
		return b
	}
	below, above := in(-2)[1], in(-2)[len(in(-2))-1] // around the recovery point
	lastB := in(-1)[len(in(-1))-1]
	end := lastB.pos + lastB.size // the data of the active segment ends here; zeros follow
	return [][]byte{
		{0},                            // intact
		op(1, recoveryPointName, 0, 9), // an unreadable recovery point: the fallback
		op(2, recoveryPointName, 2, 5), // a cut recovery point
		op(64, seg(-2, logSuffix), 0, below.pos+30),     // damage below the recovery point
		op(64, seg(-2, logSuffix), 0, above.pos+30),     // a torn tail above it
		op(255, seg(-1, logSuffix), 2, in(-1)[2].pos+7), // the last segment cut mid-batch
		op(1, seg(-2, logSuffix), 2, 0),                 // the segment holding the point emptied
		op(255, seg(1, logSuffix), 0, in(1)[3].pos+2),   // a base offset in a trusted segment
		op(254, seg(1, logSuffix), 0, in(1)[3].pos+20),  // a record count in a trusted segment
		op(16, seg(0, indexSuffix), 0, 5),               // an index file
		op(9, seg(2, logSuffix), 2, in(2)[4].pos+3),     // a trusted segment cut short
		op(64, seg(-1, logSuffix), 0, end+3),            // a flip in the padding, where a header would be
		op(64, seg(-1, logSuffix), 0, (end+4<<10)/2),    // a flip in the preallocated space
		op(64, seg(-1, logSuffix), 2, end),              // the preallocated space cut off
	}
}

// firstDiff returns the first position where b differs from the original orig (a flip
// applied twice is no change), or where it ends short of it.
func firstDiff(orig, b []byte) (int64, bool) {
	for i := range min(len(orig), len(b)) {
		if orig[i] != b[i] {
			return int64(i), true
		}
	}
	return int64(len(b)), len(b) != len(orig)
}

// isBad reports whether path names a segment file that was damaged.
func isBad(logBad map[string]int64, path string) bool {
	_, ok := logBad[filepath.Base(path)]
	return ok
}

// readAllOffsets reads [Start, Next) region by region with the given budget: offsets
// dense, every batch either the one written there or (in a damaged file) one whose CRC
// fails, until an error that checkErr accepts.
func readAllOffsets(t *testing.T, l *Log, p *fuzzPartition, logBad map[string]int64, budget int64, checkErr func(string, error) bool) {
	t.Helper()
	k := 0 // index into p.all of the batch at o
	for o := l.Start(); o < l.Next(); {
		r, err := l.ReadRegion(o, budget)
		if checkErr(fmt.Sprintf("read at %d", o), err) {
			return
		}
		buf := make([]byte, r.Len)
		_, rerr := r.File.ReadAt(buf, r.Pos)
		r.Release()
		if rerr != nil {
			t.Fatalf("read of the region at %d: %v", o, rerr)
		}
		if r.Offset != o || len(buf) == 0 {
			t.Fatalf("region at %d starts at %d with %d bytes", o, r.Offset, len(buf))
		}
		for rest := buf; len(rest) > 0; k++ {
			want := p.all[k]
			h, err := batch.ParseHeader(rest)
			if err != nil || h.BaseOffset != o || want.base != o || h.Size() > len(rest) {
				t.Fatalf("served a batch at %d that is not the one written there: %v", o, err)
			}
			if _, err := batch.Check(rest[:h.Size()]); err != nil {
				if !isBad(logBad, want.file) {
					t.Fatalf("served a corrupt batch at %d from an intact segment: %v", o, err)
				}
				return // the consumer's CRC check reports it
			}
			wantBytes := p.data[want.file][want.pos : want.pos+want.size]
			if !bytes.Equal(rest[:h.Size()], wantBytes) {
				t.Fatalf("served a batch at %d that passes its CRC but is not the one written", o)
			}
			o, rest = h.LastOffset()+1, rest[h.Size():]
		}
		if o != r.NextOffset {
			t.Fatalf("region ended at %d, its batches at %d", r.NextOffset, o)
		}
	}
}
