package bench

import (
	"math"
	"testing"
	"time"
)

// TestStageQuantile: quantiles of a cumulative histogram interpolate within the bucket
// that holds the rank, as Prometheus's histogram_quantile does; a difference of two
// scrapes counts what came between; beyond the last finite bound the answer is that bound.
func TestStageQuantile(t *testing.T) {
	inf := math.Inf(1)
	before := &stageBuckets{le: []float64{0.001, 0.002, 0.004, inf}, count: []float64{10, 10, 10, 10}}
	after := &stageBuckets{le: before.le, count: []float64{10, 60, 110, 110}} // 50 in (1,2] ms, 50 in (2,4] ms
	d := after.minus(before)
	for _, c := range []struct{ q, want float64 }{{0.5, 0.002}, {0.25, 0.0015}, {0.75, 0.003}, {0.99, 0.00396}, {1, 0.004}} {
		if got := d.quantile(c.q); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("quantile %v = %v, want %v", c.q, got, c.want)
		}
	}
	l := d.latency()
	if l == nil || l.Count != 100 || math.Abs(l.P50-2000) > 1e-6 {
		t.Fatalf("latency %+v", l)
	}
	over := &stageBuckets{le: before.le, count: []float64{0, 0, 1, 3}}
	if got := over.quantile(0.9); got != 0.004 {
		t.Fatalf("a quantile past the last bound: %v, want 0.004", got)
	}
	if (&stageBuckets{le: before.le, count: []float64{0, 0, 0, 0}}).latency() != nil {
		t.Fatal("an empty histogram has a latency")
	}
	if after.minus(&stageBuckets{le: []float64{inf}, count: []float64{1}}) != nil {
		t.Fatal("histograms of other bounds subtracted")
	}
	if got := labelOf(`sluice_request_stage_seconds_bucket{stage="wake",le="0.0005"}`, "le"); got != "0.0005" {
		t.Fatalf("labelOf: %q", got)
	}
}

// BenchmarkClock compares a reading of the harness's clock (one monotonic vDSO read) with
// time.Now().UnixNano() (wall and monotonic), which the e2e consumer took per record.
//
//	go test -run '^$' -bench '^BenchmarkClock$' -count 6 ./bench
func BenchmarkClock(b *testing.B) {
	b.Run("clock", func(b *testing.B) {
		clk := newClock()
		var sink int64
		for b.Loop() {
			sink += clk.now()
		}
		_ = sink
	})
	b.Run("time.Now", func(b *testing.B) {
		var sink int64
		for b.Loop() {
			sink += time.Now().UnixNano()
		}
		_ = sink
	})
}
