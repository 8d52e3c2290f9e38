package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"sluice/batch"
	"sluice/persist/vfs"
	"sluice/persist/vfs/errorfs"
)

// batch64K builds a 64 KiB-class batch of 1 KiB records (63 records: 63*(1024+~10)+56).
func batch64K() []byte {
	var b batch.Builder
	b.Reset(nil, 0, -1)
	value := make([]byte, 1024)
	for i := range 63 {
		value[0] = byte(i)
		b.Add(uint16(i), 1_700_000_000_000+int64(i), nil, value)
	}
	return b.Finish()
}

// exactBatch builds a batch of exactly size bytes of records of about 1 KiB.
func exactBatch(size int) []byte {
	value := make([]byte, 1024)
	for n := size / 1040; n > 0; n-- { // records of 1 KiB, then one to fill the rest
		for last := 0; last < 2048; last++ {
			var b batch.Builder
			b.Reset(nil, 0, -1)
			for i := range n {
				value[0] = byte(i)
				b.Add(uint16(i), 1_700_000_000_000+int64(i), nil, value)
			}
			b.Add(uint16(n), 1_700_000_000_000+int64(n), nil, make([]byte, last))
			if out := b.Finish(); len(out) == size {
				return out
			} else if len(out) > size {
				break
			}
		}
	}
	panic(fmt.Sprintf("BUG: no batch of exactly %d bytes", size))
}

// ringSource is a persist.Source over page-aligned memory (mmap) holding copies of one
// batch of exactly ringBatch bytes back to back: file position p of any segment is at
// p modulo the ring's size (segments are whole multiples of it). Place stamps base
// offsets into the ring; Persist reads from it. One goroutine at a time.
type ringSource struct{ mem []byte }

const ringBatch = 64 << 10

func newRingSource(tb testing.TB, size int) *ringSource {
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { unix.Munmap(mem) })
	b := exactBatch(ringBatch)
	for off := 0; off < size; off += ringBatch {
		copy(mem[off:], b)
	}
	return &ringSource{mem: mem}
}

// Settled implements persist.Source: one goroutine at a time uses a ringSource.
func (r *ringSource) Settled(f func()) { f() }

func (r *ringSource) Bytes(seg, from, to int64, dst [][]byte) ([][]byte, func(), error) {
	n := int64(len(r.mem))
	for from < to {
		off := from % n
		end := min(n, off+to-from)
		dst = append(dst, r.mem[off:end])
		from += end - off
	}
	return dst, nil, nil
}

// place places one ring batch in l and stamps its base offset into the ring.
func (r *ringSource) place(tb testing.TB, l *Log, h batch.Header, now time.Time) {
	p, err := l.Place(h, ringBatch, now)
	if err != nil {
		tb.Fatal(err)
	}
	batch.SetBaseOffset(r.mem[p.Pos%int64(len(r.mem)):], p.Base)
}

// persistBenchBytes is what each side of BenchmarkPersist writes: enough to pass the
// page cache's dirty limit (20% of memory: about 4.5 GiB on a 24 GiB host), so that the
// buffered side runs at the rate of writeback, not of memory. SLUICE_PERSIST_BENCH_GIB
// changes it.
func persistBenchBytes() int64 {
	if v, err := strconv.ParseInt(os.Getenv("SLUICE_PERSIST_BENCH_GIB"), 10, 64); err == nil && v > 0 {
		return v << 30
	}
	return 6 << 30
}

// BenchmarkPersist measures Log.Persist of 1 MiB and 4 MiB of 64 KiB batches placed
// from page-aligned memory, sync never, written with O_DIRECT and through the buffered
// fall-back (O_DIRECT refused through errorfs), against the ceiling: a raw O_DIRECT
// pwrite of the same bytes, from the same memory, in the same sizes, to files
// preallocated the same way. Each side writes persistBenchBytes (-benchtime 1x): the
// direct log and the raw ceiling in alternating rounds of 256 MiB, so that the noise of
// a shared disk hits both alike; then the buffered log alone (its writeback would slow
// whatever ran beside it). Each side's time includes its fsyncs (the log's of each
// segment it seals, under SyncNever too, and Close's of the rest), so the buffered side pays for
// all of its writeback: no file is deleted before it is synced (deleting a file drops
// its dirty pages unwritten). Disk use is bounded by persistBenchBytes per side; every
// file is deleted after.
//
//	go test -run '^$' -bench '^BenchmarkPersist$' -benchtime 1x ./persist/local
func BenchmarkPersist(b *testing.B) {
	total := persistBenchBytes()
	const round = 256 << 20
	for _, unit := range []int{1 << 20, 4 << 20} {
		b.Run(fmt.Sprintf("unit=%dMiB", unit>>20), func(b *testing.B) {
			src := newRingSource(b, 64<<20)
			var raw, direct, buffered time.Duration
			for range b.N {
				rs := newRawSide(b, src, unit)
				ls := newLogSide(b, src, unit, vfs.Default(), true)
				for done := int64(0); done < total; done += round {
					raw += rs.write(b, round)
					direct += ls.write(b, round)
				}
				raw += rs.finish(b)
				direct += ls.finish(b)
				bs := newLogSide(b, src, unit, errorfs.Wrap(vfs.Default(), refuseDirect{}), false)
				buffered += bs.write(b, total) + bs.finish(b)
			}
			mb := float64(b.N) * float64(total) / 1e6
			b.SetBytes(total)
			b.ReportMetric(mb/raw.Seconds(), "raw-MB/s")
			b.ReportMetric(mb/direct.Seconds(), "direct-MB/s")
			b.ReportMetric(mb/buffered.Seconds(), "buffered-MB/s")
			b.ReportMetric(raw.Seconds()/direct.Seconds(), "direct/raw")
			b.ReportMetric(raw.Seconds()/buffered.Seconds(), "buffered/raw")
		})
	}
}

// logSide writes through a log: units of ring batches placed, then persisted.
type logSide struct {
	l    *Log
	dir  string
	src  *ringSource
	unit int
	h    batch.Header
}

func newLogSide(b *testing.B, src *ringSource, unit int, fs vfs.FS, direct bool) *logSide {
	dir := filepath.Join(b.TempDir(), "log")
	l, err := Open(dir, Options{Sync: SyncNever, FS: fs})
	if err != nil {
		b.Fatal(err)
	}
	if l.DirectIO() != direct {
		b.Fatalf("DirectIO() = %v, want %v", l.DirectIO(), direct)
	}
	h, _ := batch.ParseHeader(src.mem)
	return &logSide{l: l, dir: dir, src: src, unit: unit, h: h}
}

// write writes n bytes and returns the time it took.
func (s *logSide) write(b *testing.B, n int64) time.Duration {
	now := time.Now()
	start := time.Now()
	for done := int64(0); done < n; done += int64(s.unit) {
		for range s.unit / ringBatch {
			s.src.place(b, s.l, s.h, now)
		}
		if _, err := s.l.Persist(s.src); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

// finish closes the log (the fsyncs) and deletes its files; it returns the time the
// close took.
func (s *logSide) finish(b *testing.B) time.Duration {
	start := time.Now()
	if err := s.l.Close(); err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	os.RemoveAll(s.dir)
	return d
}

// rawSide writes with pwrite on O_DIRECT descriptors of 1 GiB files preallocated with
// fallocate (as the log's segments), each fdatasync'd when full.
type rawSide struct {
	dir      string
	src      *ringSource
	unit     int
	fd, n    int
	pos, off int64
}

const rawFileBytes = 1 << 30

func newRawSide(b *testing.B, src *ringSource, unit int) *rawSide {
	return &rawSide{dir: b.TempDir(), src: src, unit: unit, fd: -1}
}

// write writes n bytes and returns the time it took.
func (s *rawSide) write(b *testing.B, n int64) time.Duration {
	start := time.Now()
	for done := int64(0); done < n; done += int64(s.unit) {
		if s.fd < 0 || s.pos == rawFileBytes {
			s.close()
			var err error
			if s.fd, err = unix.Open(filepath.Join(s.dir, strconv.Itoa(s.n)), unix.O_RDWR|unix.O_CREAT|unix.O_DIRECT, 0o644); err != nil {
				b.Fatal(err)
			}
			if err := unix.Fallocate(s.fd, 0, 0, rawFileBytes); err != nil {
				b.Fatal(err)
			}
			s.n, s.pos = s.n+1, 0
		}
		off := s.off % int64(len(s.src.mem))
		if _, err := unix.Pwrite(s.fd, s.src.mem[off:off+int64(s.unit)], s.pos); err != nil {
			b.Fatal(err)
		}
		s.pos, s.off = s.pos+int64(s.unit), s.off+int64(s.unit)
	}
	return time.Since(start)
}

func (s *rawSide) close() {
	if s.fd >= 0 {
		unix.Fdatasync(s.fd)
		unix.Close(s.fd)
		s.fd = -1
	}
}

// finish syncs and closes the last file and deletes the files; it returns the time the
// sync took.
func (s *rawSide) finish(b *testing.B) time.Duration {
	start := time.Now()
	s.close()
	d := time.Since(start)
	os.RemoveAll(s.dir)
	return d
}

// BenchmarkPlace measures Log.Place of 64 KiB batches: the owner's cost per batch (no
// I/O: an index entry and a few fields under the lock). Steady state must not allocate
// (index slices grow by doubling).
func BenchmarkPlace(b *testing.B) {
	l, err := Open(b.TempDir(), Options{Sync: SyncNever})
	if err != nil {
		b.Fatal(err)
	}
	defer closeUntimed(b, l)
	h, _ := batch.ParseHeader(exactBatch(ringBatch))
	now := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := l.Place(h, ringBatch, now); err != nil {
			b.Fatal(err)
		}
	}
}

// fillLog places n 64 KiB batches and persists them every 16.
func fillLog(b *testing.B, l *Log, n int) {
	b.Helper()
	src := NewMemSource()
	data := batch64K()
	for i := range n {
		if _, err := src.Append(l, append([]byte(nil), data...), time.Now()); err != nil {
			b.Fatal(err)
		}
		if i%16 == 15 || i == n-1 {
			if _, err := l.Persist(src); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkLookup measures ReadRegion of a random offset in a 64 MiB log: binary search,
// index, a header read. Steady state must not allocate.
func BenchmarkLookup(b *testing.B) {
	l, err := Open(b.TempDir(), Options{Sync: SyncNever, SegmentBytes: 8 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer closeUntimed(b, l)
	fillLog(b, l, 1024)
	next := l.Next()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := l.ReadRegion(int64(i*7919)%next, 1<<20)
		if err != nil {
			b.Fatal(err)
		}
		r.Release()
	}
}

// BenchmarkSequentialRead reads a 1 GiB log from start to end through Read in 1 MiB
// regions, against the ceiling: plain ReadAt calls of the same sizes over the same file,
// alternating rounds in one run; both from the page cache (the log's files are read
// once first: written with O_DIRECT, they are not in it). Reports both rates and the
// ratio (the goal: >= 0.8).
func BenchmarkSequentialRead(b *testing.B) {
	const total = 1 << 30
	dir := b.TempDir()
	l, err := Open(filepath.Join(dir, "log"), Options{Sync: SyncNever})
	if err != nil {
		b.Fatal(err)
	}
	defer closeUntimed(b, l)
	fillLog(b, l, total/len(batch64K()))
	// The ceiling reads the same file through its own descriptor: same pages, same
	// page-cache state, no log logic.
	raw, err := os.Open(segmentName(filepath.Join(dir, "log"), 0, logSuffix))
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	buf := make([]byte, 0, 2<<20)
	rawBuf := make([]byte, 1<<20)
	for off := l.Start(); off < l.Next(); { // warm the page cache
		if buf, off, err = l.Read(buf[:0], off, 1<<20); err != nil {
			b.Fatal(err)
		}
	}
	var off, rawPos int64
	var tLog, tRaw time.Duration
	var nLog, nRaw int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		var err error
		if off == l.Next() {
			off = 0
		}
		buf, off, err = l.Read(buf[:0], off, 1<<20)
		if err != nil {
			b.Fatal(err)
		}
		tLog += time.Since(t0)
		nLog += int64(len(buf))
		b.StopTimer()
		t1 := time.Now()
		n, _ := raw.ReadAt(rawBuf[:len(buf)], rawPos)
		rawPos += int64(n)
		if rawPos >= total-(1<<20) {
			rawPos = 0
		}
		tRaw += time.Since(t1)
		nRaw += int64(n)
		b.StartTimer()
	}
	b.SetBytes(nLog / int64(max(b.N, 1)))
	b.ReportMetric(float64(nLog)/1e6/tLog.Seconds(), "read-MB/s")
	b.ReportMetric(float64(nRaw)/1e6/tRaw.Seconds(), "raw-MB/s")
	b.ReportMetric((float64(nLog)/tLog.Seconds())/(float64(nRaw)/tRaw.Seconds()), "read/raw")
}

// BenchmarkOpen measures Open (recovery) of logs with 10, 100 and 1000 segments whose
// last segment is 1 MiB: the cost must stay flat in the number of segments, plus one scan
// of the last segment (and its cut and preallocation).
func BenchmarkOpen(b *testing.B) {
	for _, segs := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("segments=%d", segs), func(b *testing.B) {
			dir := b.TempDir()
			opts := Options{Sync: SyncNever, SegmentBytes: 1 << 20}
			l, err := Open(dir, opts)
			if err != nil {
				b.Fatal(err)
			}
			for stats(b, l).Segments < segs || activeSize(l) < (1<<20)-int64(len(batch64K())) {
				fillLog(b, l, 1)
			}
			l.Close()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l, err := Open(dir, opts)
				if err != nil {
					b.Fatal(err)
				}
				l.Close()
			}
		})
	}
}

// sealedLog writes n 64 KiB batches into a log of 8 MiB segments in dir, closes it and
// reopens it, so that every segment but the last is a sealed segment loaded from disk:
// the reads that follow go through the lazy index load and any header checks that
// sealed segments get.
func sealedLog(b *testing.B, dir string, n int) *Log {
	b.Helper()
	opts := Options{Sync: SyncNever, SegmentBytes: 8 << 20}
	l, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	fillLog(b, l, n)
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	if l, err = Open(dir, opts); err != nil {
		b.Fatal(err)
	}
	return l
}

// BenchmarkLookupSealed is BenchmarkLookup over a reopened log: random offsets in sealed
// segments loaded from disk. Steady state must not allocate.
func BenchmarkLookupSealed(b *testing.B) {
	l := sealedLog(b, b.TempDir(), 1024)
	defer closeUntimed(b, l)
	next := l.Next()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := l.ReadRegion(int64(i*7919)%next, 1<<20)
		if err != nil {
			b.Fatal(err)
		}
		r.Release()
	}
}

// BenchmarkReadAfterOpen opens a 64 MiB log of 8 MiB segments and reads it from start to
// end through Read in 1 MiB regions, once per iteration: the first read of every sealed
// segment after an open, which is where per-open checks of sealed data cost.
func BenchmarkReadAfterOpen(b *testing.B) {
	dir := b.TempDir()
	l := sealedLog(b, dir, 1024)
	l.Close()
	opts := Options{Sync: SyncNever, SegmentBytes: 8 << 20}
	buf := make([]byte, 0, 2<<20)
	var total int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, err := Open(dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		for off := l.Start(); off < l.Next(); {
			if buf, off, err = l.Read(buf[:0], off, 1<<20); err != nil {
				b.Fatal(err)
			}
			total += int64(len(buf))
		}
		l.Close()
	}
	b.SetBytes(total / int64(max(b.N, 1)))
}

// closeUntimed closes l with the timer stopped: Close fsyncs whatever the policy (so that
// its clean-shutdown record holds), which is not what these benchmarks measure.
func closeUntimed(b *testing.B, l *Log) {
	b.StopTimer()
	l.Close()
}
