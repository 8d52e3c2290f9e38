package memarena

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// rusage returns this process's minor page faults and CPU time so far.
func rusage(b *testing.B) (minflt int64, cpu time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return ru.Minflt, tv(ru.Utime) + tv(ru.Stime)
}

// anonHugeBytes reads how much of this process's memory is in transparent
// huge pages (AnonHugePages in /proc/self/smaps_rollup); 0 if unknown.
func anonHugeBytes() int64 {
	data, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if f := bytes.Fields(sc.Bytes()); len(f) == 3 && string(f[0]) == "AnonHugePages:" {
			kb, _ := strconv.ParseInt(string(f[1]), 10, 64)
			return kb * KiB
		}
	}
	return 0
}

// BenchmarkPrefaultStart measures what Config.Prefault costs at start: the
// wall time until the whole arena is faulted in, the CPU time it took (all
// of it in the prefault goroutine), the RSS it leaves and how much of that is
// in transparent huge pages. A 16 GiB run needs
// that much free memory; it is freed at once by Close. Run with -benchtime=1x.
func BenchmarkPrefaultStart(b *testing.B) {
	for _, c := range []struct {
		name  string
		size  int64
		touch bool // the fallback for kernels before 5.14
		small bool // no huge-page advice
	}{
		{"4GiB", 4 * GiB, false, false},
		{"4GiB-touch", 4 * GiB, true, false},
		{"4GiB-4KiB-pages", 4 * GiB, false, true},
		{"16GiB", 16 * GiB, false, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			if c.touch {
				defer func(v int) { populateAdvice = v }(populateAdvice)
				populateAdvice = -1
			}
			defer func(v bool) { adviseHugePages = v }(adviseHugePages)
			adviseHugePages = !c.small
			benchPrefaultStart(b, c.size)
		})
	}
}

func benchPrefaultStart(b *testing.B, size int64) {
	b.SetBytes(size)
	b.ReportAllocs()
	var wall, cpu time.Duration
	var rss uint64
	var huge int64
	for b.Loop() {
		_, cpu0 := rusage(b)
		start := time.Now()
		a, err := New(Config{Size: size, Prefault: true})
		if err != nil {
			b.Fatal(err)
		}
		waitPrefault(b, a)
		wall += time.Since(start)
		_, cpu1 := rusage(b)
		cpu += cpu1 - cpu0
		rss, huge = max(rss, residentBytes()), max(huge, anonHugeBytes())
		if got := a.Stats().PrefaultedBytes; got != size {
			b.Fatalf("prefaulted %s of %s", FormatSize(got), FormatSize(size))
		}
		if err := a.Close(); err != nil {
			b.Fatal(err)
		}
	}
	n := float64(b.N)
	b.ReportMetric(wall.Seconds()*1e3/n, "wall-ms")
	b.ReportMetric(cpu.Seconds()*1e3/n, "cpu-ms")
	b.ReportMetric(float64(rss)/float64(MiB), "rss-MiB")
	b.ReportMetric(float64(huge)/float64(MiB), "huge-MiB")
}

// BenchmarkAppendFirstTouch appends 1 GiB per iteration, in 16 KiB batches
// round robin over 16 write buffers whose checkpoints follow 4 MiB behind,
// into a 1.5 GiB arena, and reports minor page faults per GiB appended and
// the MB/s of CPU time (besides the usual MB/s of wall time):
//
//   - fresh: a new arena; every chunk is first touched by the append
//     (huge-page advice on, as always);
//   - fresh-4KiB-pages: the same without huge-page advice;
//   - warm: an arena that took 1.5 GiB before (untimed), so every chunk is
//     reused after reclaim;
//   - prefaulted: a new arena with Config.Prefault, once prefault is done.
//
// Run with -benchtime=3x or so.
func BenchmarkAppendFirstTouch(b *testing.B) {
	for _, c := range []struct {
		name      string
		prefault  bool
		warm      bool
		hugePages bool
	}{
		{"fresh", false, false, true},
		{"fresh-4KiB-pages", false, false, false},
		{"warm", false, true, true},
		{"prefaulted", true, false, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			defer func(v bool) { adviseHugePages = v }(adviseHugePages)
			adviseHugePages = c.hugePages
			benchFirstTouch(b, c.prefault, c.warm)
		})
	}
}

func benchFirstTouch(b *testing.B, prefault, warm bool) {
	const total, batchSize, buffers = GiB, 16 * KiB, 16
	batch := pattern(int(batchSize), 1)
	b.SetBytes(total)
	b.ReportAllocs()
	var faults, huge int64
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		a, err := New(Config{Size: GiB + GiB/2, Prefault: prefault})
		if err != nil {
			b.Fatal(err)
		}
		if prefault {
			waitPrefault(b, a)
		}
		ws := make([]*WriteBuffer, buffers)
		next := make([]int64, buffers)
		for i := range ws {
			if ws[i], err = a.NewWriteBuffer(0); err != nil {
				b.Fatal(err)
			}
		}
		appendRound := func(bytes int64) {
			for i := range bytes / batchSize {
				k := i % buffers
				if err := ws[k].Append(batch, next[k], next[k]); err != nil {
					b.Fatal(err)
				}
				ws[k].SetDurable(next[k] - 4*MiB/batchSize/buffers)
				next[k]++
			}
		}
		if warm {
			appendRound(GiB + GiB/2)
		}
		f0, cpu0 := rusage(b)
		b.StartTimer()
		appendRound(total)
		b.StopTimer()
		f1, cpu1 := rusage(b)
		faults, huge, cpu = faults+f1-f0, max(huge, anonHugeBytes()), cpu+cpu1-cpu0
		for _, w := range ws {
			w.Close()
		}
		if err := a.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(faults)/float64(b.N), "faults/GiB")
	b.ReportMetric(float64(huge)/float64(MiB), "huge-MiB")
	// MB/s of CPU time: on a shared host, wall time also counts waiting for a core.
	b.ReportMetric(float64(b.N)*float64(total)/1e6/cpu.Seconds(), "cpu-MB/s")
}
