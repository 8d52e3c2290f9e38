package bench

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Round is one round of an end-to-end measurement on one system, as the report lists it.
type Round struct {
	Round  int     `json:"round"` // from 1, in run order
	P50    float64 `json:"p50_us"`
	P99    float64 `json:"p99_us"`
	P999   float64 `json:"p999_us"`
	Max    float64 `json:"max_us"`
	Errors int64   `json:"errors,omitempty"`
	// Saturated: the system delivered under 95 % of the rate asked.
	Saturated bool `json:"saturated,omitempty"`
	Kept      bool `json:"kept,omitempty"` // the round Results holds
}

// bad reports whether a round lost records or missed its rate: its latencies then leave
// out records (not consumed in time) or measure a backlog, so it ranks as the worst.
func (r *Round) bad() bool { return r.Errors > 0 || r.Saturated }

// roundOf summarizes res, round i (from 0).
func roundOf(i int, res *Result) *Round {
	l := res.Latency
	return &Round{Round: i + 1, P50: l.P50, P99: l.P99, P999: l.P999, Max: l.Max, Errors: res.Errors,
		Saturated: res.RecordsPerSec < 0.95*res.Config.Rate}
}

// keepMedianRound records every round in s.Rounds and keeps in s.Results, for each
// measurement, one round for every system: the round in which sluice (Kafka without
// sluice) had its median p99, a round that lost records or missed its rate counting as
// the worst, the lower middle of an even count. Every system's kept round of a
// measurement is the same round, so the rows compared still ran within a minute of each
// other, the relay at the same moment as sluice. One round on these two shared cores can
// meet a stall of the host (a vCPU that does not run for 5-15 ms, seen even by an idle
// sleeper: BENCHMARKS.md) or miss it; the median of three is what a rerun would most
// likely show. A system without that round (it failed earlier) keeps its own median.
// rounds holds each system's results by measurement and round, nil where it has none.
func (s *Suite) keepMedianRound(rounds map[string]map[string][]*Result) {
	summaries := map[string]map[string][]*Round{} // by system and measurement, by round
	for sys, byM := range rounds {
		for m, rs := range byM {
			for i, res := range rs {
				if res == nil || res.Latency == nil {
					continue
				}
				if summaries[sys] == nil {
					summaries[sys] = map[string][]*Round{}
				}
				if summaries[sys][m] == nil {
					summaries[sys][m] = make([]*Round, len(rs))
				}
				summaries[sys][m][i] = roundOf(i, res)
			}
		}
	}
	for _, run := range e2eRuns {
		ref := -1
		for _, sys := range []string{"sluice", "kafka"} {
			if k := medianRound(summaries[sys][run.m]); k >= 0 {
				ref = k
				break
			}
		}
		for sys, byM := range summaries {
			rs := byM[run.m]
			if rs == nil {
				continue
			}
			k := ref
			if k < 0 || k >= len(rs) || rs[k] == nil {
				k = medianRound(rs)
			}
			rs[k].Kept = true
			s.put(sys, run.m, rounds[sys][run.m][k])
			if s.Rounds == nil {
				s.Rounds = map[string]map[string][]*Round{}
			}
			if s.Rounds[sys] == nil {
				s.Rounds[sys] = map[string][]*Round{}
			}
			for _, r := range rs {
				if r != nil {
					s.Rounds[sys][run.m] = append(s.Rounds[sys][run.m], r)
				}
			}
		}
	}
}

// medianRound returns the index in rs (nil entries: no round) of the median round by p99,
// bad rounds last, the lower middle of an even count; -1 when rs has none.
func medianRound(rs []*Round) int {
	var idx []int
	for i, r := range rs {
		if r != nil {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return -1
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		ra, rb := rs[a], rs[b]
		if ra.bad() != rb.bad() {
			if ra.bad() {
				return 1
			}
			return -1
		}
		return cmp.Compare(ra.P99, rb.P99)
	})
	return idx[(len(idx)-1)/2]
}

// e2eRounds returns the most rounds any end-to-end measurement of s ran (1 for a suite
// recorded before rounds were kept).
func (s *Suite) e2eRounds() int {
	n := 1
	for _, byM := range s.Rounds {
		for _, rs := range byM {
			n = max(n, len(rs))
		}
	}
	return n
}

// roundsText says how the latency runs were repeated and kept, and how their topics were
// trimmed, for the report's introduction ("" for a suite of single rounds without
// retention: one recorded before either).
func (s *Suite) roundsText() string {
	var b strings.Builder
	if n := s.e2eRounds(); n > 1 {
		fmt.Fprintf(&b, "Each measurement ran %d times on every system, the rounds one after another; each row is the round in which sluice's p99 was the median of its rounds (a round that lost records or missed its rate counting as the worst), the same round for every system, so the rows compared still ran within a minute of each other (**p99 of each round** lists every round in run order, the kept one in brackets: one run on these shared cores can meet or miss a stall of the host). ", n)
	}
	for _, run := range e2eRuns {
		if r := s.Results["sluice"][run.m]; r != nil && r.Config.RetentionBytes > 0 {
			fmt.Fprintf(&b, "The topics keep %d MiB per partition in segments of %d MiB (sluice and Kafka). ", r.Config.RetentionBytes>>20, r.Config.SegmentBytes>>20)
			break
		}
	}
	return b.String()
}

// roundsP99 formats the p99 of every round of measurement m on system sys, in run order,
// the kept round in brackets, a bad one with why, and a round the system did not run
// (it failed in an earlier one) as such ("712 µs, [961 µs], 1.72 s (411553 errors)",
// "300 µs, [200 µs], — (not run)"), or "—" without rounds.
func (s *Suite) roundsP99(sys, m string) string {
	rs := s.Rounds[sys][m]
	if len(rs) == 0 {
		return "—"
	}
	byRound := map[int]*Round{}
	n := s.e2eRounds()
	for _, r := range rs {
		byRound[r.Round] = r
		n = max(n, r.Round)
	}
	out := make([]string, 0, n)
	for k := 1; k <= n; k++ {
		r := byRound[k]
		if r == nil {
			out = append(out, "— (not run)")
			continue
		}
		v := fmtMicros(r.P99)
		if r.Errors > 0 {
			v += fmt.Sprintf(" (%d errors)", r.Errors)
		} else if r.Saturated {
			v += " (saturated)"
		}
		if r.Kept {
			v = "[" + v + "]"
		}
		out = append(out, v)
	}
	return strings.Join(out, ", ")
}

// keptNote is the charts' word on which round of the latency runs they draw ("" for a
// suite of single rounds).
func (s *Suite) keptNote() string {
	if n := s.e2eRounds(); n > 1 {
		return fmt.Sprintf("\nthe round of sluice's median p99 of %d, the same round for every system", n)
	}
	return ""
}
