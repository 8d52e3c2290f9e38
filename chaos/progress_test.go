package chaos

import "testing"

// TestDistribution pins the recovery summary's ranks: nearest rank, so the median of two
// cycles is the first of them (not the larger) and p90 of ten is the ninth.
func TestDistribution(t *testing.T) {
	for _, tc := range []struct {
		ms   []int64
		want string
	}{
		{[]int64{2188, 24}, "median 24 ms, p90 2188 ms, max 2188 ms"},
		{[]int64{5}, "median 5 ms, p90 5 ms, max 5 ms"},
		{[]int64{3, 1, 2}, "median 2 ms, p90 3 ms, max 3 ms"},
		{[]int64{10, 9, 8, 7, 6, 5, 4, 3, 2, 100}, "median 6 ms, p90 10 ms, max 100 ms"},
	} {
		if got := distribution(tc.ms); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.ms, got, tc.want)
		}
	}
}
