package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sluice/client"
	"sluice/internal/testbroker"
)

func TestDirtyLimitFrom(t *testing.T) {
	f := func(dirtyBytes, ratio, avail, want int64, how string) {
		t.Helper()
		got, gotHow := dirtyLimitFrom(dirtyBytes, ratio, avail)
		if got != want || !strings.Contains(gotHow, how) {
			t.Errorf("dirtyLimitFrom(%d, %d, %d) = %d %q, want %d %q", dirtyBytes, ratio, avail, got, gotHow, want, how)
		}
	}
	f(1<<30, 20, 24<<30, 1<<30, "vm.dirty_bytes")
	f(0, 20, 20<<30, 4<<30, "vm.dirty_ratio 20% of MemAvailable 20.0 GiB")
	if limit, _, err := DirtyLimit(); err != nil || limit <= 0 {
		t.Fatalf("DirtyLimit on this host: %d, %v", limit, err)
	}
}

func TestMeminfoBytes(t *testing.T) {
	const m = "MemTotal:       24684092 kB\nMemFree:        22531496 kB\nMemAvailable:   23979048 kB\n"
	if got := meminfoBytes(m, "MemAvailable:"); got != 23979048<<10 {
		t.Fatalf("MemAvailable %d", got)
	}
	if got := meminfoBytes(m, "Dirty:"); got != 0 {
		t.Fatalf("missing field %d", got)
	}
}

// TestDiskCeiling writes 64 MiB each way into a temporary directory (O_DIRECT may be
// refused there: then the result says so) and checks the file is gone afterwards.
func TestDiskCeiling(t *testing.T) {
	dir := t.TempDir()
	for _, mode := range []string{DiskBuffered, DiskDirect} {
		r, err := DiskCeiling(context.Background(), DiskOptions{Dir: dir, Mode: mode, Total: 64 << 20, Cap: time.Minute})
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		switch {
		case r.Refused:
			if mode != DiskDirect || r.Note == "" {
				t.Fatalf("%s refused: %+v", mode, r)
			}
			t.Logf("%s: %s", mode, r.Note)
		case r.Bytes != 64<<20 || r.MBPerSec <= 0 || r.WriteMBPerSec < r.MBPerSec:
			t.Fatalf("%s: %+v", mode, r)
		}
		if mode == DiskDirect && !r.Refused && r.SyncEvery != 64<<20 {
			t.Fatalf("direct syncs every %d", r.SyncEvery)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
	if _, err := DiskCeiling(context.Background(), DiskOptions{Dir: dir, Mode: DiskDirect, Total: 1 << 20, Cap: time.Minute}); err == nil {
		t.Fatal("a total that is not a multiple of 64 MiB is accepted")
	}
}

func TestDiskTarget(t *testing.T) {
	total, dirty, note, err := DiskTarget(t.TempDir(), 128<<20)
	if err != nil {
		t.Fatal(err)
	}
	if dirty <= 0 || note == "" || total%diskSyncEvery != 0 || total > 128<<20 {
		t.Fatalf("total %d dirty %d note %q", total, dirty, note)
	}
}

func TestScrapeCounters(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "# HELP sluice_produce_bytes_total x\n# TYPE sluice_produce_bytes_total counter\n"+
			"sluice_produce_bytes_total 2.147483648e+09\nsluice_produce_copied_bytes_total 4.294967296e+09\n"+
			"sluice_fetch_bytes_total{path=\"copy\"} 5\n")
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	got, err := ScrapeCounters(context.Background(), addr, metricProduced, metricCopied)
	if err != nil {
		t.Fatal(err)
	}
	c := CopyCount{Produced: got[metricProduced], Copied: got[metricCopied]}
	if c.Ratio() != 2 {
		t.Fatalf("ratio %v of %v", c.Ratio(), got)
	}
	if _, err := ScrapeCounters(context.Background(), addr, "sluice_missing_total"); err == nil {
		t.Fatal("a missing metric is not an error")
	}
	if (*CopyCount)(nil).Ratio() != 0 {
		t.Fatal("nil ratio")
	}
}

// TestSustainedRunEnds: a sustained produce run ends at the later of its duration and
// its bytes, and at its bound when the bytes never come.
func TestSustainedRunEnds(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f := func(d, maxD time.Duration, minBytes int64, wantMin, wantMax time.Duration) {
		t.Helper()
		c := Config{System: "tcp", Broker: dir, Topic: "s", RecordSize: 1000, Duration: d, MinBytes: minBytes, MaxDuration: maxD}
		r, err := Run(ctx, "produce", c, nil)
		if err != nil || r.Errors > 0 {
			t.Fatalf("%+v, %v", r, err)
		}
		el := time.Duration(r.Seconds * float64(time.Second))
		if el < wantMin || el > wantMax {
			t.Errorf("duration %v bytes %d: ran %v, want %v-%v", d, minBytes, el, wantMin, wantMax)
		}
		if r.Bytes < minBytes && el < maxD {
			t.Errorf("ended with %d of %d bytes before the bound", r.Bytes, minBytes)
		}
	}
	f(300*time.Millisecond, 10*time.Second, 1e6, 300*time.Millisecond, 5*time.Second) // the duration is later
	f(100*time.Millisecond, 1500*time.Millisecond, 1e15, 1500*time.Millisecond, 5*time.Second)
	bad := Config{RecordSize: 100, MinBytes: 10, Duration: time.Second}
	bad.EnsureDefaults()
	if bad.Validate() == nil {
		t.Fatal("min bytes without a max duration is accepted")
	}
}

// TestSluiceSustained runs a short sustained run against a real broker with retention
// options and metrics, and reads the copy counters around it.
func TestSluiceSustained(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	b := testbroker.Start(t, t.TempDir(), "-log.fsync", "never", "-metrics", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before, err := ScrapeCounters(ctx, b.MetricsAddr, metricProduced, metricCopied)
	if err != nil {
		t.Fatal(err)
	}
	c := Config{System: "sluice", Broker: b.Addr, Topic: "sus", RecordSize: 1024, Partitions: 2,
		Duration: time.Second, MinBytes: 20e6, MaxDuration: 20 * time.Second, RetentionBytes: 8 << 20, SegmentBytes: 1 << 20}
	r, err := Run(ctx, "produce", c, nil)
	if err != nil || r.Errors > 0 || r.Bytes < 20e6 {
		t.Fatalf("%+v, %v", r, err)
	}
	after, err := ScrapeCounters(ctx, b.MetricsAddr, metricProduced, metricCopied)
	if err != nil {
		t.Fatal(err)
	}
	cc := CopyCount{Produced: after[metricProduced] - before[metricProduced], Copied: after[metricCopied] - before[metricCopied]}
	// Batches carry headers: the broker counts a little more than the values.
	if cc.Produced < float64(r.Bytes) || cc.Produced > 1.1*float64(r.Bytes) || cc.Ratio() < 0.5 {
		t.Fatalf("counters %+v for %d value bytes", cc, r.Bytes)
	}
	t.Logf("copies per produced byte: %.2f", cc.Ratio())
	a, err := client.NewAdmin(client.Brokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	d, err := a.DescribeTopic(ctx, "sus")
	if err != nil {
		t.Fatal(err)
	}
	if d.Options.RetentionBytes != 8<<20 || d.Options.SegmentBytes != 1<<20 {
		t.Fatalf("topic options %+v", d.Options)
	}
	if _, err := os.Stat(b.Dir); err != nil {
		t.Fatal(err)
	}
}
