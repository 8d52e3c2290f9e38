package bench

import (
	"slices"
	"testing"
)

// TestLatencyTicks pins the labels of a log latency axis: powers of ten always, and the
// 2× and 5× ticks too when the axis spans less than two decades (an axis of 5-90 ms
// labelled "10 ms" alone reads as nothing).
func TestLatencyTicks(t *testing.T) {
	labels := func(lo, hi float64) []string {
		var ls []string
		for _, tk := range (latencyTicks{}).Ticks(lo, hi) {
			if tk.Label != "" {
				ls = append(ls, tk.Label)
			}
		}
		return ls
	}
	if got, want := labels(5000, 90000), []string{"5.00 ms", "10.00 ms", "20.00 ms", "50.00 ms"}; !slices.Equal(got, want) {
		t.Errorf("5-90 ms: %q, want %q", got, want)
	}
	if got, want := labels(40, 100000), []string{"100 µs", "1.00 ms", "10.00 ms", "100.00 ms"}; !slices.Equal(got, want) {
		t.Errorf("40 µs-100 ms: %q, want %q", got, want)
	}
}
