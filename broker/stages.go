package broker

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// stages times the broker's part of a record's trip from producer to consumer, per
// request, on /metrics as sluice_request_stage_seconds{stage}: where a produce or a
// long poll waits, for operators, and the broker's stages of the bench's latency
// breakdown (bench/breakdown.go). Each observation is a few clock reads and one
// histogram update per request (never per record):
//
//	queue   a produce request on its event loop: from the start of the readable event
//	        that brought it to its handler (behind the requests read with it)
//	append  the produce handler: the window's checks, validation, the copy into the
//	        arena, the answer queued (acks=accepted)
//	wake    from an append that found long polls parked on its partition to those polls
//	        answered: the hop from the loop to the partition's shard and the gather
//	send    from a fetch answer with records queued on its connection to its last byte
//	        handed to the socket: behind the connection's earlier answers, and as fast as
//	        the consumer reads
type stages struct {
	vec                       *prometheus.HistogramVec
	queue, append, wake, send prometheus.Observer
}

// stageBuckets go from 5 µs to about 10 s, each bound 1.5 times the one before: a
// quantile read from them by interpolation is off by at most half a bucket.
var stageBuckets = prometheus.ExponentialBuckets(5e-6, 1.5, 36)

func newStages() *stages {
	vec := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_request_stage_seconds",
		Help: "Where requests wait in the broker, per request: queue (a produce on its event loop before its handler), " +
			"append (the produce handler), wake (an append that found long polls parked, to those polls answered), " +
			"send (a fetch answer with records queued, to its last byte written).",
		Buckets: stageBuckets}, []string{"stage"})
	return &stages{vec: vec, queue: vec.WithLabelValues("queue"), append: vec.WithLabelValues("append"),
		wake: vec.WithLabelValues("wake"), send: vec.WithLabelValues("send")}
}

// since observes the seconds from start (Unix ns) to now (Unix ns) on h.
func since(h prometheus.Observer, start, now int64) {
	if start > 0 && now >= start {
		h.Observe(float64(now-start) / float64(time.Second))
	}
}

func (s *stages) describe(ch chan<- *prometheus.Desc) { s.vec.Describe(ch) }
func (s *stages) collect(ch chan<- prometheus.Metric) { s.vec.Collect(ch) }
