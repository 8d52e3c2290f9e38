package bench

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sluice/internal/testbroker"
)

// TestSluiceIntegration runs short produce, consume and end-to-end workloads against a
// real broker process.
func TestSluiceIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a broker")
	}
	b := testbroker.Start(t, t.TempDir(), "-log.fsync", "never", "-metrics", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := Config{System: "sluice", Broker: b.Addr, Topic: "it", RecordSize: 512, Partitions: 2, Duration: time.Second}
	p, err := Run(ctx, "produce", c, nil)
	if err != nil || p.Errors > 0 || p.Records == 0 {
		t.Fatalf("produce: %+v, %v", p, err)
	}
	before, err := scrapeFetchPaths(ctx, b.MetricsAddr)
	if err != nil {
		t.Fatal(err)
	}
	c.FromStart, c.Count, c.Duration = true, p.Records, 10*time.Second
	r, err := Run(ctx, "consume", c, nil)
	if err != nil || r.Errors > 0 || r.Records != p.Records || r.Bytes != p.Bytes {
		t.Fatalf("consume %d records of %d: %+v, %v", r.Records, p.Records, r, err)
	}
	// Every byte consumed left the broker by one of the two paths the suite reads
	// (FetchPaths), with its batch's framing on top.
	after, err := scrapeFetchPaths(ctx, b.MetricsAddr)
	if err != nil {
		t.Fatal(err)
	}
	if d := after.since(before); d.Copy+d.Sendfile < float64(r.Bytes) || d.Copy < 0 || d.Sendfile < 0 {
		t.Fatalf("the broker's fetch bytes by path over a consume of %d bytes: %+v", r.Bytes, d)
	}
	e := Config{System: "sluice", Broker: b.Addr, Topic: "it-e2e", RecordSize: 256, Rate: 2000, Duration: time.Second, Linger: time.Millisecond,
		Warmup: 500 * time.Millisecond, ServerPid: b.Pid()}
	res, err := Run(ctx, "e2e", e, nil)
	if err != nil || res.Errors > 0 || res.Latency == nil || !res.Latency.Corrected || res.Records < 1500 {
		t.Fatalf("e2e: %+v, %v", res, err)
	}
	// The broker served 2000 records/s for a second, the harness produced and consumed
	// them: each took some processor time (not much more can be asked of a broker this
	// idle), over the measured part, not the warm-up: the same span as the run's
	// seconds, from the same two instants, however slow the host. (The processor span is
	// read on the monotonic clock, the seconds on the wall clock: only a step of the wall
	// clock during the run sets them apart, and 2 ms of room is left for that.)
	if u := res.CPU; u == nil || u.Harness <= 0 || u.Server <= 0 || math.Abs(u.Wall-res.Seconds) > 0.002 || u.Cores < 1 {
		t.Fatalf("e2e processor use: %+v over a measured part of %.3fs", res.CPU, res.Seconds)
	}
}

// TestCeilings runs the tcp and sendfile ceilings in-process.
func TestCeilings(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, tc := range []struct{ system, w string }{{"tcp", "produce"}, {"tcp", "consume"}, {"sendfile", "produce"}, {"sendfile", "consume"}} {
		c := Config{System: tc.system, Broker: dir, Topic: "c", RecordSize: 1000, Count: 10_000, FromStart: tc.w == "consume", Duration: 10 * time.Second}
		r, err := Run(ctx, tc.w, c, nil)
		if err != nil || r.Records != 10_000 || r.Bytes != 10_000_000 {
			t.Fatalf("%s %s: %+v, %v", tc.system, tc.w, r, err)
		}
	}
}

// TestRelay runs the end-to-end latency ceiling against an in-process relay with two
// producers: every record arrives once and whole (the relay passes whole records only, so
// the producers' records never interleave), with a latency.
func TestRelay(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeRelay(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	c := Config{System: "relay", Broker: ln.Addr().String(), Topic: "r", RecordSize: 300, Producers: 2, Rate: 20_000,
		Duration: time.Second, Linger: 100 * time.Microsecond}
	r, err := Run(ctx, "e2e", c, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("relay: %d records in %.2fs, %d errors %s", r.Records, r.Seconds, r.Errors, r.FirstError)
	if r.Errors != 0 || r.Records < 15_000 || r.Latency == nil || r.Latency.P50 <= 0 || r.Breakdown == nil {
		t.Fatalf("relay e2e: %d records, %d errors (%s), latency %+v", r.Records, r.Errors, r.FirstError, r.Latency)
	}
	if _, err := Run(ctx, "consume", Config{System: "relay", Broker: ln.Addr().String(), Topic: "r", FromStart: true, Count: 1}, nil); err == nil {
		t.Fatal("a relay consumer from the start was taken: the relay keeps nothing")
	}
}

// TestMarkdown renders a suite with made-up results.
func TestMarkdown(t *testing.T) {
	s := &Suite{Results: map[string]map[string]*Result{}, RSS: map[string]int64{"sluice": 100 << 20}, Skipped: map[string]string{"kafka": "no jars"}}
	s.put("sluice", MProduce1K, &Result{MBPerSec: 900, RecordsPerSec: 900e3})
	s.put("nats", MProduce1K, &Result{MBPerSec: 150})
	s.put("tcp", MProduce1K, &Result{MBPerSec: 3000})
	s.put("sluice", ME2EHalf, &Result{Config: Config{Rate: 1000}, RecordsPerSec: 1000, Latency: &Latency{P50: 100, P99: 800, P999: 1500, Max: 2000},
		Breakdown: &Breakdown{Schedule: &Latency{P50: 20, P99: 90}, Transit: &Latency{P50: 70, P99: 700}, Delivery: &Latency{P50: 5, P99: 9},
			Stages: map[string]*Latency{stageClientQueue: {P50: 30, P99: 300}, stageWake: {P50: 8, P99: 80}}},
		CPU: &CPUUse{Wall: 4, Harness: 3.44, Server: 3.12, Cores: 2, HostBusy: 0.87, HostSteal: 0.04, HarnessSwitches: 7600, ServerSwitches: 120}})
	s.put("relay", ME2EHalf, &Result{Config: Config{Rate: 1000}, RecordsPerSec: 1000, Latency: &Latency{P50: 50, P99: 400, P999: 900, Max: 1000}})
	series := []float64{900, 900, 300, 300}
	s.put("sluice", MSustain1K, &Result{MBPerSec: 600, Seconds: 60, Bytes: 36e9, Series: series})
	s.put("kafka", MSustain1K, &Result{MBPerSec: 150, Series: []float64{200, 200, 100, 100}})
	s.Disk = []*DiskResult{{Mode: DiskBuffered, FS: "ext4", Bytes: 3 << 30, MBPerSec: 350, WriteMBPerSec: 400},
		{Mode: DiskDirect, FS: "ext4", Bytes: 3 << 30, MBPerSec: 1200, WriteMBPerSec: 1300, SyncEvery: 64 << 20}}
	s.Copies = &CopyCount{Run: MSustain1K, Produced: 2e9, Copied: 4e9}
	md := s.Markdown([]string{"docs/bench/throughput.png"})
	for _, want := range []string{"| produce, 1 KiB records | 900 | — | 150 | 3000 (tcp) | — | 6.00 | 0.30 |", "| half load, 4 partitions | sluice | 1000 | 100 µs | 800 µs | 1.50 ms | 2.00 ms | — | — | 2.00 | 1.64 = 0.86 + 0.78 of 2 | 1.9 + 0.030 | 87 % / 4 % | 0 |",
		"| half load, 4 partitions | relay (ceiling) | 1000 | 50 µs | 400 µs | 900 µs | 1.00 ms | — | — | — | — | — | — | 0 |",
		"end-to-end p99 ≤ 1 ms and p99.9 ≤ 5 ms, half load, 4 partitions: 800 µs / 1.50 ms — met",
		"| half load, 4 partitions | sluice | 20 µs / 90 µs | 30 µs / 300 µs | — | — | — | 8 µs / 80 µs | — | 70 µs / 700 µs | 5 µs / 9 µs |", "| sluice | 100 MiB |", "kafka: no jars", "![throughput](docs/bench/throughput.png)", "burst produce ≥ 5× NATS (1 KiB): 6.00× — met",
		"| 1 KiB records, steady | 300 | 100 | — | 1200 | 350 | 3.00 | — | 0.25 |",
		"sustained produce ≥ 0.5 of the O_DIRECT ceiling (1 KiB, steady): 0.25 — **not met**",
		"sustained produce ≥ 3× Kafka (1 KiB, steady): 3.00× — met",
		"**2.0000 copies per produced byte**", "copies per produced byte ≤ 1 (sustained 1 KiB run): 2.00 — **not met**",
		"| direct | ext4 | 3.0 GiB |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	// Where consume from memory was served from: said only when the counters were read.
	const paths = "sluice's broker sent 6.20 GB over those rounds from memory, by writev, and 0.00 GB from its files"
	if strings.Contains(md, "sluice's broker sent") {
		t.Errorf("the report says where consume from memory was served from without the counters")
	}
	s.MemoryPaths = &FetchPaths{Copy: 6.2e9}
	if md := s.Markdown(nil); !strings.Contains(md, paths) {
		t.Errorf("markdown lacks %q", paths)
	}
}

// TestCharts draws every chart of a suite with made-up results and checks that each is a
// PNG of some size.
func TestCharts(t *testing.T) {
	s := &Suite{Results: map[string]map[string]*Result{}}
	s.put("sluice", MProduce1K, &Result{MBPerSec: 900})
	s.put("kafka", MProduce1K, &Result{MBPerSec: 200})
	s.put("tcp", MProduce1K, &Result{MBPerSec: 3000})
	s.put("sendfile", MConsumePage, &Result{MBPerSec: 2000})
	s.put("sluice", MConsumePage, &Result{MBPerSec: 1800})
	cdf := []CDFPoint{{Micros: 50, Fraction: 0}, {Micros: 120, Fraction: 0.5}, {Micros: 900, Fraction: 0.99}, {Micros: 4000, Fraction: 1}}
	s.put("sluice", ME2EHalf, &Result{Config: Config{Rate: 1000}, Latency: &Latency{P50: 120, P99: 900, P999: 3000, Max: 4000, CDF: cdf},
		LatencySeries: []SeriesPoint{{At: 0.25, P50: 100, P99: 800, Max: 900, Recs: 10}, {At: 0.5, P50: 110, P99: 5000, Max: 9000, Recs: 10}}})
	s.put("sluice", MSustain1K, &Result{Series: []float64{900, 800, 850}})
	s.Disk = []*DiskResult{{Mode: DiskDirect, MBPerSec: 1200}}
	dir := t.TempDir()
	for name, draw := range map[string]func(string) error{"throughput": s.ThroughputChart, "latency-cdf": s.LatencyChart,
		"latency-time": s.LatencyOverTimeChart, "sustained": s.SustainedChart} {
		path := filepath.Join(dir, name+".png")
		if err := draw(path); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := os.ReadFile(path)
		if err != nil || len(b) < 1000 || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Fatalf("%s: %d bytes, %v", name, len(b), err)
		}
	}
}

// TestChartsWithoutLatency: a narrow run without the latency part (ONLY=consume) has no
// latency charts, and says so with ErrNoData instead of panicking on an empty log axis
// (gonum does); the throughput chart is still drawn. A relay's half-load series alone
// does not make the over-time chart, which leaves the relay out.
func TestChartsWithoutLatency(t *testing.T) {
	s := &Suite{Results: map[string]map[string]*Result{}}
	s.put("sluice", MConsumeMem, &Result{MBPerSec: 900})
	s.put("tcp", MConsumeMem, &Result{MBPerSec: 2000})
	s.put("relay", ME2EHalf, &Result{Config: Config{Rate: 1000}, LatencySeries: []SeriesPoint{{At: 0.25, P50: 100, P99: 800, Max: 900, Recs: 10}}})
	dir := t.TempDir()
	for name, draw := range map[string]func(string) error{"latency-cdf": s.LatencyChart, "latency-time": s.LatencyOverTimeChart} {
		path := filepath.Join(dir, name+".png")
		if err := draw(path); !errors.Is(err, ErrNoData) {
			t.Fatalf("%s: %v, want ErrNoData", name, err)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("%s: a file was written (%v)", name, err)
		}
	}
	if err := s.ThroughputChart(filepath.Join(dir, "throughput.png")); err != nil {
		t.Fatal(err)
	}
}

// TestRewriteNarrowSection: a narrow run's section goes before the full run's, and a
// second narrow run replaces it, leaving the full run's section as it was.
func TestRewriteNarrowSection(t *testing.T) {
	doc := "# b\n\n" + SectionBegin + "\nfull\n" + SectionEnd + "\n"
	once := RewriteNarrowSection(doc, "narrow 1")
	twice := RewriteNarrowSection(once, "narrow 2")
	want := "# b\n\n" + NarrowBegin + "\nnarrow 2\n" + NarrowEnd + "\n\n" + SectionBegin + "\nfull\n" + SectionEnd + "\n"
	if twice != want {
		t.Fatalf("got\n%s\nwant\n%s", twice, want)
	}
}
