package client

import "time"

// recordClock gives each produced record its timestamp and its window clock reading with
// one read of the monotonic clock. time.Now reads the wall and the monotonic clocks,
// two vDSO calls (about 35 ns each on the benchmark hosts), and the producer took one
// per record: 8 % of the harness's processor time at a million records a second. The
// wall time of a record is the wall time of the last anchor plus the monotonic time
// since; the anchor is read again (time.Now) once a second, so a step of the wall clock
// (NTP, a resumed VM) reaches the timestamps within a second, and a slew never drifts
// them by more than what it slews in a second. Guarded by the producer's lock.
type recordClock struct {
	t0     time.Time     // the monotonic origin of the windows' clock (Producer.t0)
	anchor time.Duration // monotonic time of the last wall reading, since t0
	wallMs int64         // the wall clock at anchor, Unix ms
}

// anchorEvery is how often the clock reads the wall clock again.
const anchorEvery = time.Second

func newRecordClock(t0 time.Time) recordClock {
	return recordClock{t0: t0, wallMs: t0.UnixMilli()}
}

// now returns the wall time in Unix ms and the monotonic time since t0.
func (c *recordClock) now() (wallMs int64, mono time.Duration) {
	mono = time.Since(c.t0) // one monotonic read: t0 carries a monotonic reading
	if mono-c.anchor >= anchorEvery {
		n := time.Now()
		mono = n.Sub(c.t0)
		c.anchor, c.wallMs = mono, n.UnixMilli()
	}
	return c.wallMs + int64((mono-c.anchor)/time.Millisecond), mono
}
