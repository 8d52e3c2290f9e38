package bench

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The components' own stages of an end-to-end run, beside the harness's (breakdown.go):
// measured per batch or per request by the components themselves, not per record, so
// they say where a record's transit went without adding up to it.
//
//	client queue   the producer (sluice's ProducerStages.Queue): a batch's first record
//	               given to the producer, to the request that carried it written
//	round trip     the producer (RoundTrip): a produce request written, to its answer read:
//	               the network both ways and the broker's queue and append
//	broker queue   the broker (sluice_request_stage_seconds{stage="queue"}): a produce on
//	               its event loop before its handler
//	append         the broker (stage="append"): the produce handler
//	long-poll wake the broker (stage="wake"): an append that found long polls parked, to
//	               those polls answered
//	send           the broker (stage="send"): a fetch answer with records queued, to its
//	               last byte written (the consumer reading it)
//
// The network alone is what round trip leaves over broker queue and append, and, on the
// consumer's side, what transit leaves over the rest.

// stageReporter is implemented by producers that time their own stages (the sluice
// driver's).
type stageReporter interface {
	// Stages returns the producer's stages by name, each summarized.
	Stages() map[string]*Latency
	// ResetStages forgets them (the end of a warm-up).
	ResetStages()
}

// The stage names of the components, as the Breakdown's JSON and the report use them.
const (
	stageClientQueue = "client_queue"
	stageRoundTrip   = "round_trip"
	stageBrokerQueue = "broker_queue"
	stageAppend      = "append"
	stageWake        = "wake"
	stageSend        = "send"
)

// brokerStages maps the broker's stage label to the breakdown's name.
var brokerStages = map[string]string{"queue": stageBrokerQueue, "append": stageAppend, "wake": stageWake, "send": stageSend}

// stageBuckets is one stage's cumulative histogram: upper bounds (seconds, ascending,
// the last +Inf) and the counts at or below each.
type stageBuckets struct {
	le    []float64
	count []float64
}

// scrapeStages reads the broker's stage histograms from its metrics endpoint.
func scrapeStages(ctx context.Context, addr string) (map[string]*stageBuckets, error) {
	const prefix = "sluice_request_stage_seconds_bucket{"
	type point struct{ le, n float64 }
	raw := map[string][]point{}
	err := scrapeEach(ctx, addr, func(series string) bool { return strings.HasPrefix(series, prefix) },
		func(series string, v float64) {
			stage, le := labelOf(series, "stage"), labelOf(series, "le")
			b, err := strconv.ParseFloat(le, 64) // "+Inf" parses as +Inf
			if stage == "" || err != nil {
				return
			}
			raw[stage] = append(raw[stage], point{b, v})
		})
	if err != nil {
		return nil, err
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("%s serves no sluice_request_stage_seconds", addr)
	}
	out := map[string]*stageBuckets{}
	for stage, pts := range raw {
		sort.Slice(pts, func(i, j int) bool { return pts[i].le < pts[j].le })
		sb := &stageBuckets{}
		for _, p := range pts {
			sb.le, sb.count = append(sb.le, p.le), append(sb.count, p.n)
		}
		out[stage] = sb
	}
	return out, nil
}

// labelOf returns the value of label name in a series written as name{a="x",b="y"}.
func labelOf(series, name string) string {
	_, rest, ok := strings.Cut(series, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// minus returns the counts of b since before (the same bounds), nil when they differ.
func (b *stageBuckets) minus(before *stageBuckets) *stageBuckets {
	if before == nil {
		return b
	}
	if len(before.le) != len(b.le) {
		return nil
	}
	d := &stageBuckets{le: b.le, count: make([]float64, len(b.count))}
	for i := range b.count {
		d.count[i] = b.count[i] - before.count[i]
	}
	return d
}

// quantile returns the q-th quantile (0 to 1) in seconds, interpolated linearly within
// its bucket as Prometheus's histogram_quantile does; NaN when empty.
func (b *stageBuckets) quantile(q float64) float64 {
	n := len(b.count)
	if n == 0 || b.count[n-1] == 0 {
		return math.NaN()
	}
	rank := q * b.count[n-1]
	i := sort.Search(n, func(i int) bool { return b.count[i] >= rank })
	if i == n-1 && math.IsInf(b.le[i], 1) {
		return b.le[max(n-2, 0)] // beyond the last finite bound: say that bound
	}
	lo, below := 0.0, 0.0
	if i > 0 {
		lo, below = b.le[i-1], b.count[i-1]
	}
	if in := b.count[i] - below; in > 0 {
		return lo + (b.le[i]-lo)*(rank-below)/in
	}
	return b.le[i]
}

// latency summarizes the buckets as a Latency (µs), nil when empty.
func (b *stageBuckets) latency() *Latency {
	if b == nil || len(b.count) == 0 || b.count[len(b.count)-1] == 0 {
		return nil
	}
	us := func(q float64) float64 { return b.quantile(q) * 1e6 }
	return &Latency{Count: int64(b.count[len(b.count)-1]), P50: us(0.5), P90: us(0.9), P99: us(0.99), P999: us(0.999),
		Max: us(1)}
}

// brokerStagesSince scrapes the broker's stages and returns what was observed since
// before (nil: since the broker started), by the breakdown's names.
func brokerStagesSince(ctx context.Context, addr string, before map[string]*stageBuckets) (map[string]*Latency, error) {
	after, err := scrapeStages(ctx, addr)
	if err != nil {
		return nil, err
	}
	out := map[string]*Latency{}
	for stage, b := range after {
		if name, ok := brokerStages[stage]; ok {
			if l := b.minus(before[stage]).latency(); l != nil {
				out[name] = l
			}
		}
	}
	return out, nil
}

// latencyOf summarizes a distribution given by its quantile function (nanoseconds) as a
// Latency (µs), nil when count is 0.
func latencyOf(count int64, q func(pct float64) time.Duration) *Latency {
	if count == 0 {
		return nil
	}
	us := func(pct float64) float64 { return float64(q(pct)) / 1e3 }
	return &Latency{Count: count, P50: us(50), P90: us(90), P99: us(99), P999: us(99.9), Max: us(100)}
}
