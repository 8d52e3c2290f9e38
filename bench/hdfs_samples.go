package bench

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// The broker's HDFS metrics, sampled during the lag and outage runs of make bench-hdfs,
// and what is computed from them: lag percentiles and the catch-up after an outage.

const (
	metricLagSeconds = "sluice_partition_hdfs_lag_seconds"
	metricLagBytes   = "sluice_partition_hdfs_lag_bytes"
	metricShipped    = "sluice_hdfs_shipped_bytes_total"
)

// caughtUpLag is the largest partition lag at which an outage's backlog counts as gone:
// at half load the lag is tens of milliseconds with spikes of about a second, so under
// a second no partition still holds data from the outage.
const caughtUpLag = 1.0

// HDFSSample is one scrape of a broker's HDFS metrics.
type HDFSSample struct {
	At time.Time `json:"at"`
	// LagMax is the largest sluice_partition_hdfs_lag_seconds over the partitions.
	LagMax float64 `json:"lag_max_seconds"`
	// LagBytes is sluice_partition_hdfs_lag_bytes summed over the partitions.
	LagBytes float64 `json:"lag_bytes"`
	// Shipped is sluice_hdfs_shipped_bytes_total.
	Shipped float64 `json:"shipped_bytes"`
}

// scrapeHDFS reads one HDFSSample from the broker whose metrics are at addr.
func scrapeHDFS(ctx context.Context, addr string) (HDFSSample, error) {
	s := HDFSSample{At: time.Now()}
	keep := func(series string) bool {
		return strings.HasPrefix(series, "sluice_partition_hdfs_lag_") || series == metricShipped
	}
	err := scrapeEach(ctx, addr, keep, func(series string, v float64) {
		name, _, _ := strings.Cut(series, "{")
		switch name {
		case metricLagSeconds:
			s.LagMax = max(s.LagMax, v)
		case metricLagBytes:
			s.LagBytes += v
		case metricShipped:
			s.Shipped = v
		}
	})
	return s, err
}

// sampler scrapes a broker's HDFS metrics every interval on a goroutine of its own
// until Stop (a failed scrape is skipped: the broker is busy, not gone, and the gap
// shows in the times). Safe from any goroutine.
type sampler struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     struct {
		sync.Mutex
		samples []HDFSSample
	}
}

// sampleHDFS starts a sampler of the broker whose metrics are at addr.
func sampleHDFS(ctx context.Context, addr string, interval time.Duration) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	sp := &sampler{cancel: cancel}
	sp.wg.Go(func() {
		everyTick(ctx, interval, func() bool {
			if s, err := scrapeHDFS(ctx, addr); err == nil {
				sp.mu.Lock()
				sp.mu.samples = append(sp.mu.samples, s)
				sp.mu.Unlock()
			}
			return true
		})
	})
	return sp
}

// Samples returns a copy of the samples taken so far.
func (sp *sampler) Samples() []HDFSSample {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return slices.Clone(sp.mu.samples)
}

// Stop ends the sampling and returns every sample taken.
func (sp *sampler) Stop() []HDFSSample {
	sp.cancel()
	sp.wg.Wait()
	return sp.Samples()
}

// LagStats are percentiles of the largest partition lag over a run's samples, in seconds.
type LagStats struct {
	Samples int     `json:"samples"`
	P50     float64 `json:"p50_seconds"`
	P99     float64 `json:"p99_seconds"`
	Max     float64 `json:"max_seconds"`
}

// lagStats returns the nearest-rank percentiles of the samples' LagMax.
func lagStats(samples []HDFSSample) LagStats {
	v := make([]float64, len(samples))
	for i, s := range samples {
		v[i] = s.LagMax
	}
	slices.Sort(v)
	st := LagStats{Samples: len(v)}
	if len(v) == 0 {
		return st
	}
	rank := func(p float64) float64 { return v[max(0, int(math.Ceil(p*float64(len(v))))-1)] }
	st.P50, st.P99, st.Max = rank(0.50), rank(0.99), v[len(v)-1]
	return st
}

// CatchUp is what the samples of an outage run show after HDFS came back.
type CatchUp struct {
	// Resumed is the time from HDFS's return to the first sample with more bytes
	// shipped; Gone to the first sample after that with every partition's lag under
	// caughtUpLag. Both are 0 when it did not happen while sampled.
	Resumed float64 `json:"resumed_after_seconds"`
	Gone    float64 `json:"backlog_gone_after_seconds"`
	// Shipped over Seconds is the catch-up: the bytes HDFS acknowledged from the last
	// sample before the first shipped byte to the first sample with the lag gone.
	Shipped float64 `json:"shipped_bytes"`
	Seconds float64 `json:"seconds"`
	// PeakBacklog is the largest sum of the partitions' lag in bytes over the samples.
	PeakBacklog float64 `json:"peak_backlog_bytes"`
}

// MBPerSec is the catch-up rate in 10^6 bytes per second, 0 if unknown.
func (c CatchUp) MBPerSec() float64 {
	if c.Seconds <= 0 {
		return 0
	}
	return c.Shipped / 1e6 / c.Seconds
}

// catchUp finds the catch-up in the samples of an outage run whose HDFS came back at
// back. done is false when shipping did not resume or the backlog was not gone by the
// last sample.
func catchUp(samples []HDFSSample, back time.Time) (c CatchUp, done bool) {
	for _, s := range samples {
		c.PeakBacklog = max(c.PeakBacklog, s.LagBytes)
	}
	i := slices.IndexFunc(samples, func(s HDFSSample) bool { return !s.At.Before(back) })
	if i < 0 {
		return c, false
	}
	base := samples[max(0, i-1)].Shipped // acknowledged before the outage ended
	for ; i < len(samples) && samples[i].Shipped <= base; i++ {
	}
	if i == len(samples) {
		return c, false
	}
	first := samples[max(0, i-1)]
	c.Resumed = samples[i].At.Sub(back).Seconds()
	for j := i; j < len(samples); j++ {
		if samples[j].LagMax < caughtUpLag {
			c.Gone = samples[j].At.Sub(back).Seconds()
			c.Shipped = samples[j].Shipped - first.Shipped
			c.Seconds = samples[j].At.Sub(first.At).Seconds()
			return c, true
		}
	}
	return c, false
}
