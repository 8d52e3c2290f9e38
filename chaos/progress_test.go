package chaos

import (
	"strings"
	"testing"
	"time"
)

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

// TestLoadState pins the slow heal's line: how long since the heal, whether anything was
// persisted or read after it, and each writer's activity with its age.
func TestLoadState(t *testing.T) {
	r := &run{}
	now := time.Now()
	healed := now.Add(-1500 * time.Millisecond)
	r.prog.readFrom(0, healed.Add(-time.Second).UnixNano())
	r.prog.readFrom(1, healed.Add(500*time.Millisecond).UnixNano())
	r.prog.last.Store(healed.Add(-2 * time.Second).UnixNano())
	for i, a := range []activity{actWaiting, actSync} {
		w := &writer{index: i, kind: writerKinds[i]}
		w.set(a)
		w.doingSince.Store(healed.Add(-time.Duration(i+1) * time.Second).UnixNano())
		r.writers = append(r.writers, w)
	}
	got := r.loadState(healed, now)
	for _, want := range []string{
		"no record persisted 1.5s after the heal",
		"last persisted not since the heal",
		"last read 1s ago",
		"writer 0 (async persisted keyed, none) waiting for its ack for 2.5s",
		"writer 1 (sync persisted, none) in ProduceSync for 3.5s",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("%q\ndoes not say %q", got, want)
		}
	}
}
