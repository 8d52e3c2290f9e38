package bench

import (
	"encoding/binary"
	"time"

	"sluice/internal/nanosleep"
)

// stampSize is the size of the timestamp at the front of every record value.
const stampSize = 8

// putStamp writes t (Unix nanoseconds) at the front of a record value.
func putStamp(v []byte, t int64) { binary.LittleEndian.PutUint64(v, uint64(t)) }

// stampOf returns the timestamp at the front of a record value, 0 if it is too short.
func stampOf(v []byte) int64 {
	if len(v) < stampSize {
		return 0
	}
	return int64(binary.LittleEndian.Uint64(v))
}

// Pacer is a fixed-rate schedule: record i is due at start + i/rate. It is a plain value
// with no clock of its own, so it is tested without sleeping; the producer loop reads the
// clock and sleeps. A Pacer is used by one goroutine.
type Pacer struct {
	start    int64   // Unix ns of record 0
	interval float64 // ns between records; 0 = unpaced
	next     int64   // index of the next record
}

// NewPacer returns a schedule of rate records/s from start; rate 0 means no schedule.
func NewPacer(start time.Time, rate float64) *Pacer {
	p := &Pacer{start: start.UnixNano()}
	if rate > 0 {
		p.interval = 1e9 / rate
	}
	return p
}

// Paced reports whether the pacer has a schedule.
func (p *Pacer) Paced() bool { return p.interval > 0 }

// Due returns when the next record is due (Unix ns).
func (p *Pacer) Due() int64 { return p.start + int64(float64(p.next)*p.interval) }

// Take returns how many records are due at now (at least 0) and advances past them.
// Their intended send times are Intended(first), Intended(first+1), ...; first is the
// index of the first of them.
func (p *Pacer) Take(now int64) (first, n int64) {
	first = p.next
	if !p.Paced() {
		p.next++
		return first, 1
	}
	if now < p.start {
		return first, 0
	}
	last := int64(float64(now-p.start) / p.interval) // index due at or before now
	if last < p.next {
		return first, 0
	}
	n = last - p.next + 1
	p.next = last + 1
	return first, n
}

// Intended returns when record i was due (Unix ns). This, not the moment the record was
// actually sent, is what its latency is measured from: the correction for coordinated
// omission.
func (p *Pacer) Intended(i int64) int64 { return p.start + int64(float64(i)*p.interval) }

// minPace is the shortest sleep of a paced producer loop. At 212 000 records/s a record
// is due every 5 µs, and sleeping until the next one cost a wake-up (a timerfd armed and
// read, the goroutine parked and woken) every few records: in an 8 s run at that rate
// the harness spent 3.5 s in system calls, against 2.6 s when it wakes at most every
// 50 µs (0.1 of a core, on two cores the broker shares; BENCHMARKS.md). Records due
// meanwhile go out together after the sleep, each at most minPace late, which its
// latency counts like any lateness of the harness: it is measured from when the record
// was due. A rate of up to 20 000 records/s never sleeps less than this anyway.
const minPace = 50 * time.Microsecond

// sleepUntil sleeps until t (Unix ns), with s for short sleeps. It
// never spins: on two cores a spinning producer takes the CPU the broker and the
// consumers need; timer overshoot delays the records, which count it in their latency as
// they should.
//
// Go's timers wake no sooner than its netpoller's millisecond timeout (a 100 µs
// time.Sleep overslept by 1.0 ms at the median on these hosts, 2.2 ms at p99), so a
// schedule of one record every 100 µs would go out in bursts a millisecond apart and
// every system's latency would carry up to a millisecond of the harness's own lateness.
// Short sleeps therefore wait on a timerfd (nanosleep.Sleeper: 28 µs median overshoot,
// and the goroutine parks, leaving its P to the consumers; nanosleep(2) held it), long
// ones in time.Sleep.
func sleepUntil(t int64, clk clock, s *nanosleep.Sleeper) {
	d := time.Duration(t - clk.now())
	switch {
	case d <= 0:
	case d < 2*time.Millisecond:
		s.Sleep(d)
	default:
		time.Sleep(d)
	}
}

// clock is the harness's clock for its per-record readings: Unix ns, as the wall clock
// read once at start plus the monotonic time since. A reading is one vDSO call, where
// time.Now().UnixNano() makes two (wall and monotonic, about 35 ns each on these hosts):
// the e2e consumer read the clock for every record, 8 % of the harness's processor time
// at a million records a second, time the systems measured beside it did not get. Every
// per-record reading of one run (the producers' stamps, the consumers' arrivals) comes
// from one clock, so a step of the wall clock during a run does not enter a latency
// (the drivers' arrival times of answers, read once per answer for the stages, are the
// wall clock: they differ from this one by its drift since the run began, µs).
type clock struct {
	t0   time.Time // carries a monotonic reading
	base int64     // t0 in Unix ns
}

func newClock() clock {
	t := time.Now()
	return clock{t0: t, base: t.UnixNano()}
}

// now returns the time in Unix ns.
func (c clock) now() int64 { return c.base + int64(time.Since(c.t0)) }
