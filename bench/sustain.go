package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Sustained produce runs: each system, freshly started on an empty data directory,
// takes producers as fast as it can for at least sustainMin and 20 GB (whichever is
// later; bounded by sustainMax), on a topic whose retention keeps the disk from
// filling. The data directory is deleted after each run. For sluice, the broker's
// produced and copied byte counters are read before and after the 1 KiB run: their
// ratio is the user-space copies per produced byte.

// The sustained measurement names.
const (
	MSustain1K  = "sustain-1k"
	MSustain100 = "sustain-100"
)

// Retention of the sustained topics, per partition (4 partitions): at most about 2 GiB
// per system on disk, plus what arrives between two retention checks (Kafka: 5 s;
// sluice: 30 s, broker.Config.RetentionCheck, which has no flag; NATS: at every write).
const (
	sustainRetention = 512 << 20
	sustainSegment   = 64 << 20
	// sustainNeed is the free space (beyond DiskReserve) a sustained run starts with:
	// retention plus 30 s at 500 MB/s, rounded up.
	sustainNeed = 20 << 30
)

// CopyCount is the sluice broker's produce byte counters over one run
// (sluice_produce_bytes_total and sluice_produce_copied_bytes_total, differences of
// scrapes before and after it).
type CopyCount struct {
	Run      string  `json:"run"`
	Produced float64 `json:"produced_bytes"`
	Copied   float64 `json:"copied_bytes"`
}

// Ratio is the copies per produced byte, 0 when nothing was produced.
func (c *CopyCount) Ratio() float64 {
	if c == nil || c.Produced == 0 {
		return 0
	}
	return c.Copied / c.Produced
}

// ScrapeCounters reads the named unlabelled metrics from a Prometheus text endpoint at
// addr (host:port, path /metrics). A name the endpoint does not serve is an error.
func ScrapeCounters(ctx context.Context, addr string, names ...string) (map[string]float64, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	got := map[string]float64{}
	err := scrapeEach(ctx, addr, func(series string) bool { return want[series] }, func(series string, v float64) {
		got[series] = v
	})
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if _, ok := got[n]; !ok {
			return nil, fmt.Errorf("%s does not serve %s", addr, n)
		}
	}
	return got, nil
}

// scrapeEach reads the Prometheus text endpoint at addr (host:port, path /metrics) and
// calls each with every series (the name with its labels, as written) that keep takes.
func scrapeEach(ctx context.Context, addr string, keep func(series string) bool, each func(series string, v float64)) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("cannot scrape %s: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cannot scrape %s: %s", addr, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		series, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(series, "#") || !keep(series) {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err != nil {
			return fmt.Errorf("cannot parse %s from %s: %w", series, addr, err)
		}
		each(series, v)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("cannot read the metrics of %s: %w", addr, err)
	}
	return nil
}

const (
	metricProduced = "sluice_produce_bytes_total"
	metricCopied   = "sluice_produce_copied_bytes_total"
)

// runSustained runs the sustained produce runs against srv (stopped or running): for
// each record size it starts the server on an empty data directory, runs, stops it and
// deletes the data directory.
func runSustained(ctx context.Context, s *Suite, srv *Server, sz suiteSizes, logf func(string, ...any)) error {
	name := srv.Name
	defer func() {
		srv.Stop()
		os.RemoveAll(srv.Dir)
	}()
	for _, st := range []struct {
		m     string
		topic string
		rec   int
	}{{MSustain1K, "s1k", 1024}, {MSustain100, "s100", 100}} {
		srv.Stop()
		if err := os.RemoveAll(srv.Dir); err != nil {
			return err
		}
		avail, size, _, err := DiskSpace(s.workDir)
		if err != nil {
			return err
		}
		if avail-DiskReserve(size) < sustainNeed {
			return fmt.Errorf("%s: %.1f GiB free, %.1f GiB kept for others: too little for a sustained run (%.0f GiB)",
				st.m, float64(avail)/(1<<30), float64(DiskReserve(size))/(1<<30), float64(sustainNeed)/(1<<30))
		}
		srv.PeakRSS = 0
		if err := srv.Start(ctx); err != nil {
			return err
		}
		c := baseConfig(name, srv.Addr, st.topic, st.rec)
		c.Duration, c.MinBytes, c.MaxDuration = sz.sustainMin, sz.sustainBytes, sz.sustainMax
		c.RetentionBytes, c.SegmentBytes = sustainRetention, sustainSegment
		r, err := runWatched(ctx, s, srv, st.m, c)
		if err != nil {
			return err
		}
		logf("%-8s %-18s %s; steady %.1f MB/s%s", name, st.m, Summary(r), r.Steady(), notePrefix(r.Note))
	}
	return nil
}

// runWatched is one sustained run: the produce run, the copy counters around it (sluice,
// 1 KiB) and a watch on the free space that stops the run if it falls below
// DiskReserve.
func runWatched(ctx context.Context, s *Suite, srv *Server, m string, c Config) (*Result, error) {
	var before map[string]float64
	counted := srv.MetricsAddr != "" && m == MSustain1K
	if counted {
		var err error
		if before, err = ScrapeCounters(ctx, srv.MetricsAddr, metricProduced, metricCopied); err != nil {
			return nil, err
		}
	}
	r, err := produceGuarded(ctx, srv, s.workDir, c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m, err)
	}
	s.put(srv.Name, m, r)
	if counted {
		after, err := ScrapeCounters(ctx, srv.MetricsAddr, metricProduced, metricCopied)
		if err != nil {
			return nil, err
		}
		s.Copies = &CopyCount{Run: m, Produced: after[metricProduced] - before[metricProduced],
			Copied: after[metricCopied] - before[metricCopied]}
	}
	return r, nil
}

// produceGuarded is a produce run against srv that stops early if the free space of
// workDir falls below DiskReserve; the result's Note says what bounded the run when its
// settings did not, and BrokerRSS is srv's peak.
func produceGuarded(ctx context.Context, srv *Server, workDir string, c Config) (*Result, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	low := watchFree(wctx, cancel, workDir)
	r, err := Run(wctx, "produce", c, nil)
	srv.SampleRSS()
	if err != nil {
		return nil, err
	}
	switch note := low(); {
	case note != "":
		r.Note = note
	case c.MinBytes > 0 && r.Bytes < c.MinBytes && r.Errors == 0:
		r.Note = fmt.Sprintf("ended at the %v bound, before %.0f GB", c.MaxDuration, float64(c.MinBytes)/1e9)
	}
	r.BrokerRSS = srv.PeakRSS
	return r, nil
}

// watchFree checks dir's free space every second until ctx ends; below DiskReserve it
// calls stop. The returned function says what happened ("" if nothing).
func watchFree(ctx context.Context, stop func(), dir string) func() string {
	var mu sync.Mutex
	note := ""
	go everyTick(ctx, time.Second, func() bool {
		avail, size, _, err := DiskSpace(dir)
		if err == nil && avail < DiskReserve(size) {
			mu.Lock()
			note = fmt.Sprintf("stopped early: free space fell to %.1f GiB", float64(avail)/(1<<30))
			mu.Unlock()
			stop()
			return false
		}
		return true
	})
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return note
	}
}

// everyTick calls f every interval until ctx ends or f returns false.
func everyTick(ctx context.Context, interval time.Duration, f func() bool) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !f() {
			return
		}
	}
}

func notePrefix(note string) string {
	if note == "" {
		return ""
	}
	return " (" + note + ")"
}
