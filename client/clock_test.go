package client

import (
	"testing"
	"time"
)

// TestRecordClock: the clock's wall time follows time.Now's to the millisecond, its
// monotonic time never goes back, and it reads the wall clock again once its anchor is a
// second old (so a step of the wall clock reaches the timestamps within a second).
func TestRecordClock(t *testing.T) {
	t0 := time.Now()
	c := newRecordClock(t0)
	var last time.Duration
	for i := range 2000 {
		before := time.Now().UnixMilli()
		wall, mono := c.now()
		after := time.Now().UnixMilli()
		// The anchor's wall reading and the monotonic time since may disagree by a
		// rounding of each: a millisecond either way.
		if wall < before-1 || wall > after+1 {
			t.Fatalf("call %d: wall %d ms, time.Now gave %d..%d", i, wall, before, after)
		}
		if mono < last {
			t.Fatalf("call %d: monotonic time went back from %v to %v", i, last, mono)
		}
		last = mono
		if i%200 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	anchor := c.anchor
	c.anchor -= 2 * anchorEvery // as if a second had passed since the anchor
	c.wallMs -= 5000            // and the wall clock had been stepped 5 s forward since
	before := time.Now().UnixMilli()
	wall, _ := c.now()
	if c.anchor <= anchor-2*anchorEvery || wall < before-1 {
		t.Fatalf("the clock did not read the wall clock again after a second: anchor %v (was %v), wall %d ms, now %d ms",
			c.anchor, anchor, wall, before)
	}
}
