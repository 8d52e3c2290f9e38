package client

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// ProducerStages is where a producer's records waited before the broker had them, since
// the producer started or its last ResetStages: the client's stages of a record's trip
// (the broker's are on its /metrics, sluice_request_stage_seconds). Each is measured per
// batch or per request, never per record.
type ProducerStages struct {
	// Queue is, per batch, from its first record given to Produce to the write of the
	// request that first carried it: the linger, and the wait for a request slot while
	// the partition's requests are in flight.
	Queue Durations
	// RoundTrip is, per data request, from its write to its answer read: the network
	// both ways, the broker's queue and append, the answer's way back.
	RoundTrip Durations
}

// Durations is a distribution of durations, from 1 µs to a minute, to 3 significant
// digits. The zero value is empty.
type Durations struct{ h *hdrhistogram.Histogram }

// Count returns how many durations were recorded.
func (d Durations) Count() int64 {
	if d.h == nil {
		return 0
	}
	return d.h.TotalCount()
}

// Quantile returns the duration at percentile q (0 to 100); 0 when empty.
func (d Durations) Quantile(q float64) time.Duration {
	if d.h == nil {
		return 0
	}
	return time.Duration(d.h.ValueAtQuantile(q))
}

// producerStages records a producer's stages; its own lock, taken once per request.
type producerStages struct {
	mu               sync.Mutex
	queue, roundTrip *hdrhistogram.Histogram
}

func newDurations() *hdrhistogram.Histogram {
	return hdrhistogram.New(int64(time.Microsecond), int64(time.Minute), 3)
}

func newProducerStages() *producerStages {
	return &producerStages{queue: newDurations(), roundTrip: newDurations()}
}

// clampNs keeps d within the histograms' range.
func clampNs(d int64) int64 { return min(max(d, int64(time.Microsecond)), int64(time.Minute)) }

// written records the queue stage of the batches of a request written at now that no
// earlier request carried (clock: Producer.now).
func (s *producerStages) written(batches []*pbatch, now int64) {
	s.mu.Lock()
	for _, b := range batches {
		if !b.written {
			b.written = true
			_ = s.queue.RecordValue(clampNs(now - b.opened))
		}
	}
	s.mu.Unlock()
}

// answered records a data request's round trip.
func (s *producerStages) answered(sentAt, now int64) {
	s.mu.Lock()
	_ = s.roundTrip.RecordValue(clampNs(now - sentAt))
	s.mu.Unlock()
}

// Stages returns a copy of where the producer's records waited (see ProducerStages).
// Safe from any goroutine.
func (p *Producer) Stages() ProducerStages {
	s := p.stages
	s.mu.Lock()
	defer s.mu.Unlock()
	cp := func(h *hdrhistogram.Histogram) Durations { return Durations{hdrhistogram.Import(h.Export())} }
	return ProducerStages{Queue: cp(s.queue), RoundTrip: cp(s.roundTrip)}
}

// ResetStages forgets what Stages has recorded (the end of a warm-up). Safe from any
// goroutine.
func (p *Producer) ResetStages() {
	s := p.stages
	s.mu.Lock()
	s.queue.Reset()
	s.roundTrip.Reset()
	s.mu.Unlock()
}
