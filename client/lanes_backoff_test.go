package client

import (
	"slices"
	"testing"
	"time"
)

// TestLaneBackoffPerLane: each failed lane waits its own backoff. A lane of a broker
// that keeps failing doubles its wait up to the maximum; a lane of another broker that
// fails for the first time meanwhile waits the minimum and is due long before the first
// (they shared one wait before: the second lane joined the first's, and every revive
// doubled it for both). A lane whose partitions delivered since starts again from the
// minimum, and a lane that mixes partitions takes the longest of their waits, doubled.
func TestLaneBackoffPerLane(t *testing.T) {
	const lo, hi = 10 * time.Millisecond, time.Second
	flapping := []*cpart{{id: 0}, {id: 1}}
	var waits []time.Duration
	for range 9 {
		waits = append(waits, laneBackoff(flapping, lo, hi))
	}
	want := []time.Duration{10, 20, 40, 80, 160, 320, 640, 1000, 1000}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if !slices.Equal(waits, want) {
		t.Fatalf("waits of a lane failing again and again: %v, want %v", waits, want)
	}

	other := []*cpart{{id: 2}, {id: 3}}
	if d := laneBackoff(other, lo, hi); d != lo {
		t.Fatalf("another broker's lane failing for the first time waits %v, want the minimum %v", d, lo)
	}
	now := time.Unix(1000, 0)
	var down downLanes
	down.add(flapping, now, now.Add(hi))
	down.add(other, now, now.Add(lo))
	if next := down.next(); !next.Equal(now.Add(lo)) {
		t.Fatalf("the first lane due at %v, want the second broker's at %v", next, now.Add(lo))
	}
	asked := now.Add(lo) // the metadata asked for once the first lane was due
	if due := down.takeDue(now.Add(2*lo), asked); len(due) != 2 || due[0].id != 2 || due[1].id != 3 {
		t.Fatalf("due after %v: %v, want partitions 2 and 3 only", 2*lo, ids(due))
	}
	if down.empty() || !down.next().Equal(now.Add(hi)) {
		t.Fatalf("the flapping broker's lane is not left waiting for its own time: %+v", down.lanes)
	}
	if due := down.takeDue(now.Add(hi), asked); len(due) != 2 || due[0].id != 0 || !down.empty() {
		t.Fatalf("due at %v: %v, want partitions 0 and 1, and no lane left down", hi, ids(due))
	}

	// A lane that failed after the metadata was asked for is not started with it (it may
	// name the broker just lost), even when due by the answer: it waits for the next ask.
	late := []*cpart{{id: 4}}
	down.add(late, asked.Add(time.Millisecond), asked.Add(2*time.Millisecond))
	if due := down.takeDue(asked.Add(time.Second), asked); len(due) != 0 || down.empty() {
		t.Fatalf("a lane that failed after the ask was started with its answer: %v", ids(due))
	}
	if due := down.takeDue(asked.Add(time.Second), asked.Add(3*time.Millisecond)); len(due) != 1 || !down.empty() {
		t.Fatalf("the next ask's answer did not start the lane: %v", ids(due))
	}

	for _, p := range other { // a revived lane of them delivered (Consumer.await)
		p.backoff = 0
	}
	mixed := []*cpart{other[0], flapping[0]}
	if d := laneBackoff(mixed, lo, hi); d != hi {
		t.Fatalf("a lane of a partition that delivered and one that waits %v: %v, want %v", hi, d, hi)
	}
	other[1].backoff = 0
	if d := laneBackoff(other[1:], lo, hi); d != lo {
		t.Fatalf("a lane whose partitions delivered since waits %v, want the minimum %v", d, lo)
	}
}

func ids(parts []*cpart) []int {
	var out []int
	for _, p := range parts {
		out = append(out, p.id)
	}
	return out
}
