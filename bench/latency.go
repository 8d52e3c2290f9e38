package bench

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram bounds: 1 µs to 1 minute, 3 significant digits; values are nanoseconds.
const (
	histMin    = int64(time.Microsecond)
	histMax    = int64(time.Minute)
	histDigits = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, histDigits) }

// Recorder collects latencies: one histogram for the whole run and one for the current
// progress interval. Safe from any goroutine.
type Recorder struct {
	mu struct {
		sync.Mutex
		// window is the latency-over-time interval (takeWindow), apart from interval,
		// which the progress line takes.
		total, interval, window *hdrhistogram.Histogram
	}
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	r := &Recorder{}
	r.mu.total, r.mu.interval, r.mu.window = newHist(), newHist(), newHist()
	return r
}

// takeWindow returns the percentiles of what was recorded since the last call (µs) and
// starts a new window.
func (r *Recorder) takeWindow() SeriesPoint {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.mu.window
	p := SeriesPoint{P50: float64(w.ValueAtQuantile(50)) / 1e3, P99: float64(w.ValueAtQuantile(99)) / 1e3,
		Max: float64(w.Max()) / 1e3, Recs: w.TotalCount()}
	w.Reset()
	return p
}

// clampLatency keeps v within the histogram's range: below 1 µs counts as 1 µs, above a
// minute as a minute (RecordValue would refuse it).
func clampLatency(v int64) int64 { return min(max(v, histMin), histMax) }

// Record adds one latency (ns).
func (r *Recorder) Record(v int64) {
	v = clampLatency(v)
	r.mu.Lock()
	_ = r.mu.total.RecordValue(v)
	_ = r.mu.interval.RecordValue(v)
	_ = r.mu.window.RecordValue(v)
	r.mu.Unlock()
}

// RecordAll adds a slice of latencies under one lock.
func (r *Recorder) RecordAll(vs []int64) {
	r.mu.Lock()
	for _, v := range vs {
		v = clampLatency(v)
		_ = r.mu.total.RecordValue(v)
		_ = r.mu.interval.RecordValue(v)
		_ = r.mu.window.RecordValue(v)
	}
	r.mu.Unlock()
}

// IntervalP99 returns the p99 since the last call (ns; 0 when nothing was recorded) and
// starts a new interval.
func (r *Recorder) IntervalP99() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.mu.interval.ValueAtQuantile(99)
	r.mu.interval.Reset()
	return v
}

// Reset forgets everything recorded (the end of a warm-up).
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.mu.total.Reset()
	r.mu.interval.Reset()
	r.mu.window.Reset()
	r.mu.Unlock()
}

// Summary returns the percentiles of everything recorded, nil when nothing was.
func (r *Recorder) Summary(corrected bool) *Latency {
	r.mu.Lock()
	defer r.mu.Unlock()
	return summarize(r.mu.total, corrected)
}

// Latency is the summary of a latency histogram; every value is in microseconds.
type Latency struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean_us"`
	P50   float64 `json:"p50_us"`
	P90   float64 `json:"p90_us"`
	P99   float64 `json:"p99_us"`
	P999  float64 `json:"p999_us"`
	Max   float64 `json:"max_us"`
	// Corrected says whether latencies were measured from the intended send times of a
	// fixed-rate schedule (corrected for coordinated omission).
	Corrected bool `json:"corrected"`
	// CDF holds (latency, fraction at or below) points for the charts.
	CDF []CDFPoint `json:"cdf,omitempty"`
}

// CDFPoint is one point of a latency distribution.
type CDFPoint struct {
	Micros   float64 `json:"us"`
	Fraction float64 `json:"fraction"`
}

// cdfQuantiles are the points kept for the CDF chart: dense in the tail.
var cdfQuantiles = []float64{0, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 100}

func summarize(h *hdrhistogram.Histogram, corrected bool) *Latency {
	if h.TotalCount() == 0 {
		return nil
	}
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	l := &Latency{
		Count:     h.TotalCount(),
		Mean:      h.Mean() / 1e3,
		P50:       us(h.ValueAtQuantile(50)),
		P90:       us(h.ValueAtQuantile(90)),
		P99:       us(h.ValueAtQuantile(99)),
		P999:      us(h.ValueAtQuantile(99.9)),
		Max:       us(h.Max()),
		Corrected: corrected,
	}
	for _, q := range cdfQuantiles {
		l.CDF = append(l.CDF, CDFPoint{Micros: us(h.ValueAtQuantile(q)), Fraction: q / 100})
	}
	return l
}
