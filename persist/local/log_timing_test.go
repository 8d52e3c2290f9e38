package local

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sluice/batch"
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

// BenchmarkAppend measures Log.Append of 64 KiB batches of 1 KiB records with fsync
// never, against the ceiling: the same bytes written with WriteAt to a plain file, timed
// in alternating rounds within one run so that machine noise hits both alike. It reports
// both rates and their ratio (the goal: append >= 0.8 of raw).
func BenchmarkAppend(b *testing.B) {
	data := batch64K()
	dir := b.TempDir()
	l, err := Open(filepath.Join(dir, "log"), Options{Sync: SyncNever})
	if err != nil {
		b.Fatal(err)
	}
	defer closeUntimed(b, l)
	raw, err := os.Create(filepath.Join(dir, "raw"))
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	const round = 64 // 4 MiB per round and side
	var tLog, tRaw time.Duration
	var rawPos int64
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(round, b.N-done)
		t0 := time.Now()
		for range n {
			if _, err := l.Append(data); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		b.StopTimer()
		for range n {
			if _, err := raw.WriteAt(data, rawPos); err != nil {
				b.Fatal(err)
			}
			rawPos += int64(len(data))
		}
		tRaw += time.Since(t1)
		b.StartTimer()
		tLog += t1.Sub(t0)
		done += n
	}
	mb := float64(b.N) * float64(len(data)) / 1e6
	b.ReportMetric(mb/tLog.Seconds(), "append-MB/s")
	b.ReportMetric(mb/tRaw.Seconds(), "raw-MB/s")
	b.ReportMetric(tRaw.Seconds()/tLog.Seconds(), "append/raw")
}

// BenchmarkLookup measures ReadRegion of a random offset in a 64 MiB log: binary search,
// index, a header read. Steady state must not allocate.
func BenchmarkLookup(b *testing.B) {
	l, err := Open(b.TempDir(), Options{Sync: SyncNever, SegmentBytes: 8 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer closeUntimed(b, l)
	data := batch64K()
	for range 1024 {
		if _, err := l.Append(data); err != nil {
			b.Fatal(err)
		}
	}
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
// alternating rounds in one run; both from the page cache. Reports both rates and the
// ratio (the goal: >= 0.8).
func BenchmarkSequentialRead(b *testing.B) {
	const total = 1 << 30
	dir := b.TempDir()
	l, err := Open(filepath.Join(dir, "log"), Options{Sync: SyncNever})
	if err != nil {
		b.Fatal(err)
	}
	defer closeUntimed(b, l)
	data := batch64K()
	for written := 0; written < total; written += len(data) {
		if _, err := l.Append(data); err != nil {
			b.Fatal(err)
		}
	}
	// The ceiling reads the same file through its own descriptor: same pages, same
	// page-cache state, no log logic.
	raw, err := os.Open(segmentName(filepath.Join(dir, "log"), 0, logSuffix))
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	buf := make([]byte, 0, 2<<20)
	rawBuf := make([]byte, 1<<20)
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
// of the last segment.
func BenchmarkOpen(b *testing.B) {
	data := batch64K()
	for _, segs := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("segments=%d", segs), func(b *testing.B) {
			dir := b.TempDir()
			opts := Options{Sync: SyncNever, SegmentBytes: 1 << 20}
			l, err := Open(dir, opts)
			if err != nil {
				b.Fatal(err)
			}
			for stats(b, l).Segments < segs || activeSize(l) < (1<<20)-int64(len(data)) {
				if _, err := l.Append(data); err != nil {
					b.Fatal(err)
				}
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
	data := batch64K()
	for range n {
		if _, err := l.Append(data); err != nil {
			b.Fatal(err)
		}
	}
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
