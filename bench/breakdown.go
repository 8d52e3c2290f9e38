package bench

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Where an end-to-end record's time goes, from timestamps the run already has: the
// record's intended send time (the fixed-rate schedule, front of the value), the moment
// the harness handed it to the producer (sentStamp, after it), the moment the consumer's
// poll that brought it returned (Arrivals, where the driver reports it), and the moment
// the harness got the record. The stages:
//
//	schedule   intended → handed to the producer: the harness's own lateness (its sleep
//	           overshoot) and the producer blocking on a full buffer (client queue)
//	transit    handed → the consumer's poll returned it: the producer's batching and
//	           linger, the network both ways, the broker (queue, append, long-poll wake)
//	delivery   poll returned → record handed to the harness: the consumer iterating the
//	           answer (records earlier in the same answer first)
//
// Each stage is a distribution of its own (the percentiles of the stages do not add up
// to the end-to-end ones); a regression shows in the stage where it happens.

// sentOffset is where the send stamp sits in a record value, after the intended time.
const sentOffset = stampSize

// putSent writes the time the harness handed the record to the producer.
func putSent(v []byte, t int64) {
	if len(v) >= sentOffset+8 {
		binary.LittleEndian.PutUint64(v[sentOffset:], uint64(t))
	}
}

// sentOf returns the send stamp of a record value, 0 when it has none.
func sentOf(v []byte) int64 {
	if len(v) < sentOffset+8 {
		return 0
	}
	return int64(binary.LittleEndian.Uint64(v[sentOffset:]))
}

// Arrivals is implemented by consumers that can tell when the poll that brought the
// current record returned (Unix ns). Run's fn may call it.
type Arrivals interface {
	Arrived() int64
}

// Breakdown is the JSON form of the stages (see above); each is nil when not measured.
type Breakdown struct {
	Schedule *Latency `json:"schedule,omitempty"`
	Transit  *Latency `json:"transit,omitempty"`
	Delivery *Latency `json:"delivery,omitempty"`
	// Stages are the components' own stages (stages.go), per batch or request, by name:
	// client_queue, round_trip (the producer's), broker_queue, append, wake, send (the
	// broker's); those a run could not read are missing.
	Stages map[string]*Latency `json:"stages,omitempty"`
}

// stages collects the stage histograms. Safe from any goroutine.
type stages struct {
	mu                          sync.Mutex
	schedule, transit, delivery *hdrhistogram.Histogram
}

func newStages() *stages {
	return &stages{schedule: newHist(), transit: newHist(), delivery: newHist()}
}

// stageSample is one record's stage times (ns; -1 when not known).
type stageSample struct{ schedule, transit, delivery int64 }

// sample computes a record's stages from its value, the poll's return (0 when the
// driver does not report it) and now.
func sampleOf(v []byte, arrived, now int64) stageSample {
	s := stageSample{-1, -1, -1}
	sent := sentOf(v)
	if sent == 0 {
		return s
	}
	s.schedule = sent - stampOf(v)
	if arrived > 0 {
		s.transit, s.delivery = arrived-sent, now-arrived
	}
	return s
}

// recordAll adds samples under one lock.
func (st *stages) recordAll(ss []stageSample) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, s := range ss {
		for _, p := range [...]struct {
			h *hdrhistogram.Histogram
			v int64
		}{{st.schedule, s.schedule}, {st.transit, s.transit}, {st.delivery, s.delivery}} {
			if p.v >= 0 {
				_ = p.h.RecordValue(clampLatency(p.v))
			}
		}
	}
}

// reset forgets everything (the end of a warm-up).
func (st *stages) reset() {
	st.mu.Lock()
	st.schedule.Reset()
	st.transit.Reset()
	st.delivery.Reset()
	st.mu.Unlock()
}

// summary returns the stages' percentiles, nil when nothing was recorded.
func (st *stages) summary() *Breakdown {
	st.mu.Lock()
	defer st.mu.Unlock()
	b := &Breakdown{Schedule: summarize(st.schedule, false), Transit: summarize(st.transit, false),
		Delivery: summarize(st.delivery, false)}
	if b.Schedule == nil {
		return nil
	}
	for _, l := range []*Latency{b.Schedule, b.Transit, b.Delivery} {
		if l != nil {
			l.CDF = nil
		}
	}
	return b
}

// SeriesPoint is the latency of the records that arrived in one interval of an e2e run.
type SeriesPoint struct {
	// At is the interval's end, seconds from the start of the measured part.
	At   float64 `json:"at_s"`
	P50  float64 `json:"p50_us"`
	P99  float64 `json:"p99_us"`
	Max  float64 `json:"max_us"`
	Recs int64   `json:"records"`
}

// seriesInterval is the length of a latency-over-time interval.
const seriesInterval = 250 * time.Millisecond

// sampleLatencySeries appends a SeriesPoint every seriesInterval to *series until the
// returned stop is called. start gives the measured part's start (Unix ns; the warm-up
// moves it), and rec's window histogram is reset each time.
func sampleLatencySeries(rec *Recorder, start func() int64, series *[]SeriesPoint) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(seriesInterval)
		defer t.Stop()
		from := start()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				if st := start(); st != from { // the warm-up ended: its points do not count
					*series, from = (*series)[:0], st
				}
				p := rec.takeWindow()
				at := float64(now.UnixNano()-from) / 1e9
				if at > 0 && p.Recs > 0 {
					p.At = at
					*series = append(*series, p)
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
