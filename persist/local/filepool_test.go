package local

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sluice/batch"
	"sluice/persist/vfs"
)

// openFilesUnder counts the descriptors of this process open on files under dir.
func openFilesUnder(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot list descriptors: %v", err)
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(target, dir+"/") {
			n++
		}
	}
	return n
}

// TestFilePoolBoundsDescriptors: two logs of many sealed segments share a pool of 8.
// Reading every offset of both opens every segment file in turn, yet never more than 8
// sealed files are open (counted by the pool and in /proc), while three regions held
// from the start keep reading their evicted files correctly.
func TestFilePoolBoundsDescriptors(t *testing.T) {
	root := t.TempDir()
	pool := NewFilePool(8)
	opts := Options{SegmentBytes: 4 << 10, Sync: SyncNever, Files: pool}
	var logs []*Log
	for i := range 2 {
		dir := filepath.Join(root, fmt.Sprint(i))
		buildLog(t, dir, opts, 900)
		logs = append(logs, openLog(t, dir, opts))
	}
	if s := stats(t, logs[0]); s.Segments < 30 {
		t.Fatalf("only %d segments", s.Segments)
	}
	// Hold regions of three sealed segments of the first log.
	var held []Region
	for _, o := range []int64{0, logs[0].Next() / 3, logs[0].Next() / 2} {
		r, err := logs[0].ReadRegion(o, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, r)
	}
	check := func(when string) {
		t.Helper()
		if n := pool.Open(); n > 8 {
			t.Fatalf("%s: the pool has %d files open, limit 8", when, n)
		}
		// Each log's active segment is open outside the pool.
		if n := openFilesUnder(t, root); n > 8+len(logs) {
			t.Fatalf("%s: %d descriptors open under the data directory, want at most %d", when, n, 8+len(logs))
		}
	}
	for o := int64(0); o < max(logs[0].Next(), logs[1].Next()); o++ {
		for _, l := range logs {
			if o >= l.Next() {
				continue
			}
			r, err := l.ReadRegion(o, 1)
			if err != nil {
				t.Fatalf("offset %d: %v", o, err)
			}
			if r.Offset > o || r.NextOffset <= o {
				t.Fatalf("region at %d covers [%d, %d)", o, r.Offset, r.NextOffset)
			}
			r.Release()
			check(fmt.Sprintf("offset %d", o))
		}
	}
	for _, l := range logs {
		checkContents(t, l)
		check("after reading everything")
	}
	for _, r := range held { // their files were evicted from the pool, not closed
		buf := make([]byte, r.Len)
		if _, err := r.File.ReadAt(buf, r.Pos); err != nil {
			t.Fatalf("held region at %d: %v", r.Offset, err)
		}
		for o, rest := r.Offset, buf; len(rest) > 0; {
			h, err := batch.Check(rest)
			if err != nil {
				t.Fatalf("held region at %d: %v", r.Offset, err)
			}
			checkBatch(t, rest[:h.Size()], o)
			o, rest = h.LastOffset()+1, rest[h.Size():]
		}
		r.Release()
	}
	for _, l := range logs {
		l.Close()
	}
	if n := pool.Open(); n != 0 {
		t.Fatalf("%d files still open after closing every log", n)
	}
	if n := openFilesUnder(t, root); n != 0 {
		t.Fatalf("%d descriptors still open under the data directory", n)
	}
}

// TestFilePoolConcurrent: readers on several goroutines read random offsets through a
// pool of 3 while the owner appends, rolls and applies retention; every read returns the
// batches written there, or says the offset has gone.
func TestFilePoolConcurrent(t *testing.T) {
	pool := NewFilePool(3)
	clk := &fakeClock{now: time.Unix(1000, 0)}
	var clkMu sync.Mutex
	now := func() time.Time { clkMu.Lock(); defer clkMu.Unlock(); return clk.Now() }
	opts := Options{SegmentBytes: 4 << 10, Sync: SyncNever, Files: pool, RetentionBytes: 64 << 10, Clock: now}
	dir := t.TempDir()
	buildLog(t, dir, opts, 300)
	l := openLog(t, dir, opts)
	done := make(chan struct{})
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			var buf []byte
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				start, next := l.Bounds()
				o := start + rng.Int64N(max(next-start, 1))
				var err error
				buf, _, err = l.Read(buf[:0], o, int64(rng.IntN(8<<10)))
				if errors.Is(err, ErrOffsetOutOfRange) {
					continue // retention got there first
				}
				if err != nil {
					errs <- fmt.Errorf("read at %d: %w", o, err)
					return
				}
				for rest := buf; len(rest) > 0; {
					h, err := batch.Check(rest)
					if err != nil {
						errs <- fmt.Errorf("read at %d: %w", o, err)
						return
					}
					rest = rest[h.Size():]
				}
			}
		}()
	}
	for range 40 {
		appendN(t, l, 20)
		if _, err := l.ApplyRetention(l.Durable()); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	checkContents(t, l)
	if n := pool.Open(); n > 3 {
		t.Fatalf("%d files open, limit 3", n)
	}
}

func TestFilePoolLimit(t *testing.T) {
	if n := FilePoolLimit(); n < 16 {
		t.Fatalf("FilePoolLimit() = %d", n)
	}
	var o Options
	o.EnsureDefaults()
	if o.Files == nil || o.Files.Limit() != FilePoolLimit() {
		t.Fatal("the default pool is not sized by FilePoolLimit")
	}
	shared := o // a copy of filled options shares the pool, as the broker's topics do
	shared.EnsureDefaults()
	if shared.Files != o.Files {
		t.Fatal("options filled once do not share their pool")
	}
}

// lowLimitDirEnv tells a re-executed test binary to act as TestManySegmentsUnderLowFileLimit's child.
const lowLimitDirEnv = "SLUICE_LOW_FD_CHILD_DIR"

// TestManySegmentsUnderLowFileLimit is the review's case: a partition rolling far more
// segments than the process may open files (RLIMIT_NOFILE 256, 1200 segments), written
// and then read end to end in a child process. Sealed segments used to keep their
// descriptors, so the child failed with EMFILE after about 250 rolls; with the default
// file pool it keeps a quarter of the limit open at most.
func TestManySegmentsUnderLowFileLimit(t *testing.T) {
	if os.Getenv(lowLimitDirEnv) != "" {
		t.Skip("running as the child")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLowFileLimitChild$")
	cmd.Env = append(os.Environ(), lowLimitDirEnv+"="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "segments read") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// TestLowFileLimitChild is the child of TestManySegmentsUnderLowFileLimit.
func TestLowFileLimitChild(t *testing.T) {
	dir := os.Getenv(lowLimitDirEnv)
	if dir == "" {
		t.Skip("only runs as TestManySegmentsUnderLowFileLimit's child")
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: 256, Max: 256}); err != nil {
		t.Fatal(err)
	}
	opts := Options{SegmentBytes: 4 << 10, IndexInterval: 1 << 10, Sync: SyncNever, FS: noSyncFS{vfs.Default()}}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for stats(t, l).Segments < 1200 {
		appendN(t, l, 50)
	}
	checkContents(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, opts)
	checkContents(t, l)
	fmt.Printf("%d segments read, %d files open in the pool (limit %d)\n", stats(t, l).Segments, l.opts.Files.Open(), l.opts.Files.Limit())
}
