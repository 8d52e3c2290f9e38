package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"sluice/persist/hdfs"
)

func TestLagStats(t *testing.T) {
	var samples []HDFSSample
	for i := 100; i >= 1; i-- { // 0.01 .. 1.00, out of order
		samples = append(samples, HDFSSample{LagMax: float64(i) / 100})
	}
	st := lagStats(samples)
	if st.Samples != 100 || st.P50 != 0.50 || st.P99 != 0.99 || st.Max != 1.00 {
		t.Fatalf("lagStats of 0.01..1.00: %+v", st)
	}
	if st := lagStats(samples[:1]); st.P50 != 1 || st.P99 != 1 || st.Max != 1 {
		t.Fatalf("one sample: %+v", st)
	}
	if st := lagStats(nil); st != (LagStats{}) {
		t.Fatalf("no samples: %+v", st)
	}
}

// outageSamples is an outage run sampled every second from t0: shipped bytes flat from
// the kill (second 2) until second resume, then 100 MB/s; the largest lag grows by a
// second per second until the backlog is gone at second gone, then 0.1 s.
func outageSamples(t0 time.Time, resume, gone, n int) []HDFSSample {
	var ss []HDFSSample
	shipped := 0.0
	for i := range n {
		lag := 0.1
		switch {
		case i >= 2 && i < resume:
			lag = float64(i - 1)
		case i >= resume && i < gone:
			lag = float64(resume - 1)
			shipped += 100e6
		default:
			shipped += 50e6
		}
		ss = append(ss, HDFSSample{At: t0.Add(time.Duration(i) * time.Second), LagMax: lag, LagBytes: lag * 50e6, Shipped: shipped})
	}
	return ss
}

func TestCatchUp(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	back := t0.Add(5 * time.Second)
	c, done := catchUp(outageSamples(t0, 7, 12, 20), back)
	if !done {
		t.Fatalf("not done: %+v", c)
	}
	// First shipped byte between seconds 6 and 7: counted from 6 to 12, where 5 samples
	// at 100 MB and one at 50 MB arrived.
	if c.Resumed != 2 || c.Gone != 7 || c.Seconds != 6 || c.Shipped != 550e6 {
		t.Fatalf("catch-up %+v", c)
	}
	if got := c.MBPerSec(); fmt.Sprintf("%.1f", got) != "91.7" {
		t.Fatalf("rate %v", got)
	}
	if c.PeakBacklog != 6*50e6 {
		t.Fatalf("peak backlog %v", c.PeakBacklog)
	}
	if _, done := catchUp(outageSamples(t0, 7, 30, 20), back); done {
		t.Fatal("a backlog still there at the last sample counted as gone")
	}
	if _, done := catchUp(outageSamples(t0, 30, 40, 20), back); done {
		t.Fatal("no shipping after the return counted as a catch-up")
	}
	if _, done := catchUp(outageSamples(t0, 7, 12, 20), t0.Add(time.Minute)); done {
		t.Fatal("a return after the last sample counted as a catch-up")
	}
}

func TestScrapeHDFS(t *testing.T) {
	const metrics = `# HELP sluice_partition_hdfs_lag_seconds how long
# TYPE sluice_partition_hdfs_lag_seconds gauge
sluice_partition_hdfs_lag_seconds{partition="0",topic="a"} 0.25
sluice_partition_hdfs_lag_seconds{partition="1",topic="a"} 1.5
sluice_partition_hdfs_lag_seconds{partition="2",topic="a"} 0
sluice_partition_hdfs_lag_bytes{partition="0",topic="a"} 1000
sluice_partition_hdfs_lag_bytes{partition="1",topic="a"} 2000
sluice_partition_hdfs_lag_offsets{partition="1",topic="a"} 7
sluice_hdfs_shipped_bytes_total 3.5e+09
sluice_hdfs_shipped_bytes_totally_other 9
`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(metrics)) }))
	defer srv.Close()
	s, err := scrapeHDFS(context.Background(), strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if s.LagMax != 1.5 || s.LagBytes != 3000 || s.Shipped != 3.5e9 {
		t.Fatalf("sample %+v", s)
	}
}

func TestRewriteHDFSSection(t *testing.T) {
	block := func(s string) string { return HDFSSectionBegin + "\n" + s + "\n" + HDFSSectionEnd + "\n" }
	suite := SectionBegin + "\nsuite\n" + SectionEnd + "\n"
	doc := "# hand\n\n## HDFS\ntext\n\n" + suite
	once := RewriteHDFSSection(doc, "gen")
	if want := "# hand\n\n## HDFS\ntext\n\n" + block("gen") + "\n" + suite; once != want {
		t.Fatalf("first rewrite:\n got %q\nwant %q", once, want)
	}
	if twice := RewriteHDFSSection(once, "new"); twice != strings.Replace(once, "gen", "new", 1) {
		t.Fatalf("second rewrite: %q", twice)
	}
	if got := RewriteSection(once, "s2"); !strings.Contains(got, block("gen")) || !strings.Contains(got, "\ns2\n") {
		t.Fatalf("the suite's rewrite touched the HDFS section: %q", got)
	}
	if got := RewriteHDFSSection("# hand\n", "gen"); got != "# hand\n\n"+block("gen") {
		t.Fatalf("no anchor: %q", got)
	}
}

// TestHDFSMarkdown renders a run and checks the ratios the issue asks for.
func TestHDFSMarkdown(t *testing.T) {
	run := func(mbps float64) *Result {
		return &Result{MBPerSec: mbps, Config: Config{Duration: 20 * time.Second, RecordSize: 1024}}
	}
	b := &HDFSBench{
		RawWrite: hdfs.Rate{Bytes: 200e6, Seconds: 1}, RawRead: hdfs.Rate{Bytes: 800e6, Seconds: 1},
		Local: []*Result{run(800), run(900)}, WithHDFS: []*Result{run(160), run(180)},
		HalfLoad: &Result{MBPerSec: 85, Config: Config{Rate: 83000, RecordSize: 1024, Duration: 30 * time.Second}},
		Lag:      LagStats{Samples: 120, P50: 0.017, P99: 1.2, Max: 1.5},
		Outage: &Outage{Rate: 50000, Producers: 4, Down: 60, Done: true,
			CatchUp: CatchUp{Resumed: 2, Gone: 30, Shipped: 2.8e9, Seconds: 28}},
		ReadReader: hdfs.Rate{Bytes: 96e6, Seconds: 0.4}, ReadRaw: hdfs.Rate{Bytes: 96e6, Seconds: 0.1},
	}
	md := b.Markdown()
	for _, want := range []string{
		"| mean | 850 | 170 | **0.20** |",                                           // HDFS/local
		"170 / 200 MB/s = **0.85**",                                                 // with HDFS against raw write
		"p50 **17 ms**, p99 **1.20 s**",                                             // lag
		"**100 MB/s**, against the raw write rate of this run (200 MB/s): **0.50**", // catch-up
		"reader 240 MB/s, raw 960 MB/s: **0.25**",
		"0.20 — **not met**",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	b.Outage.Done = false
	if md := b.Markdown(); !strings.Contains(md, "not gone within") || strings.Contains(md, "catch-up after a 60 s outage") {
		t.Errorf("an unfinished catch-up reported as one:\n%s", md)
	}
}
