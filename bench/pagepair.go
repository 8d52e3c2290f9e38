package bench

import (
	"context"
	"fmt"
	"os"
)

// pageCeiling runs the sendfile ceiling of consume from the page cache one round at a
// time, so that the suite can alternate its rounds with sluice's. Measured apart (all of
// sluice's rounds, then all of the ceiling's, a minute later), the ratio moved with the
// host's minute: in the suites of 2026-12-06 the ceiling's median ranged 3 808-5 161 MB/s
// and sluice's ratio to it 0.77-1.02, while rounds run back to back, each sluice round
// followed by a ceiling round (`pcvs.sh` in the notebook), gave 0.86-0.91 in five pairs.
// Each round of either side then runs within a second of a round of the other.
type pageCeiling struct {
	dir    string // the ceiling's file directory, beside the servers' data
	sz     suiteSizes
	ready  bool // the file is written
	rounds []*Result
}

// config is the ceiling's consume (or, with produce, the run that writes its file).
func (p *pageCeiling) config(produce bool) Config {
	c := baseConfig("sendfile", p.dir, "c1k", 1024)
	c.Count, c.Duration, c.FromStart = p.sz.count1K, p.sz.cap, !produce
	return c
}

// round runs one round of the ceiling's consume, writing its file first on the first
// round (that run is the sendfile ceiling's produce, as runCeilings would have put it).
func (p *pageCeiling) round(ctx context.Context, s *Suite, logf func(string, ...any)) error {
	if !p.ready {
		os.RemoveAll(p.dir)
		if err := os.MkdirAll(p.dir, 0o755); err != nil {
			return fmt.Errorf("sendfile ceiling: %w", err)
		}
		r, err := Run(ctx, "produce", p.config(true), nil)
		if err != nil {
			return fmt.Errorf("sendfile %s: %w", MProduce1K, err)
		}
		s.put("sendfile", MProduce1K, r)
		logf("%-8s %-18s %s", "sendfile", MProduce1K, Summary(r))
		p.ready = true
	}
	r, err := Run(ctx, "consume", p.config(false), nil)
	if err != nil {
		return fmt.Errorf("sendfile %s: %w", MConsumePage, err)
	}
	p.rounds = append(p.rounds, r)
	logf("%-8s %-18s round %d: %s", "sendfile", MConsumePage, len(p.rounds), Summary(r))
	return nil
}

// finish puts the ceiling's run of median MB/s, when every round ran, and removes its
// file. runCeilings does not measure what finish put.
func (p *pageCeiling) finish(s *Suite, want int) {
	if len(p.rounds) == want && want > 0 {
		r := medianRun(p.rounds)
		r.Note = "alternating with sluice's runs; " + r.Note
		s.put("sendfile", MConsumePage, r)
	}
	os.RemoveAll(p.dir)
}
