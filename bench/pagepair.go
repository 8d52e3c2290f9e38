package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// ceilingsBeside runs the ceilings of sluice's consume runs beside them, one round at a
// time, so that the suite can alternate their rounds with sluice's: the sendfile ceiling
// of consume from the page cache (pageRound) and the tcp ceiling of consume from memory
// (tcpRound). Measured apart (all of sluice's rounds, then all of the ceiling's, a minute
// later), the ratio moved with the host's minute: in the suites of 2026-12-06 the
// sendfile ceiling's median ranged 3 808-5 161 MB/s and sluice's ratio to it 0.77-1.02,
// while rounds run back to back, each sluice round followed by a ceiling round (`pcvs.sh`
// in the notebook), gave 0.86-0.91 in five pairs. Each round of either side now runs
// seconds from a round of the other (a restart of sluice and the read of its files lie
// between some of them).
//
// A failure of a ceiling is the ceiling's, not sluice's: the round logs it, stops that
// ceiling's pairing, and leaves the ceiling to runCeilings, which measures it after
// sluice's runs as before.
type ceilingsBeside struct {
	dir    string // the ceiling's file directory, beside the servers' data
	sz     suiteSizes
	ready  bool  // the file is written
	err    error // the failure that stopped the sendfile pairing
	rounds []*Result
	tcpErr error // the failure that stopped the tcp pairing
	tcp    []*Result
}

// pairedNote starts the note of a ceiling result measured alternating with sluice's.
const pairedNote = "alternating with sluice's runs; "

// pageRound runs one round of the sendfile ceiling's consume, writing its file first on
// the first round (that run is the sendfile ceiling's produce, as runCeilings would have
// put it).
// After a failure it does nothing.
func (p *ceilingsBeside) pageRound(ctx context.Context, s *Suite, logf func(string, ...any)) {
	if p.err != nil {
		return
	}
	if err := p.run(ctx, s, logf); err != nil {
		p.err = err
		s.Skipped["sendfile alternating with sluice"] = err.Error()
		logf("sendfile ceiling, alternating with sluice: %v (measured after sluice's runs instead)", err)
	}
}

func (p *ceilingsBeside) run(ctx context.Context, s *Suite, logf func(string, ...any)) error {
	if !p.ready {
		os.RemoveAll(p.dir)
		if err := os.MkdirAll(p.dir, 0o755); err != nil {
			return fmt.Errorf("sendfile ceiling: %w", err)
		}
		r, err := Run(ctx, "produce", ceilingConfig("sendfile", p.dir, 1024, p.sz.count1K, p.sz.cap, false), nil)
		if err != nil {
			return fmt.Errorf("sendfile %s: %w", MProduce1K, err)
		}
		s.put("sendfile", MProduce1K, r)
		logf("%-8s %-18s %s", "sendfile", MProduce1K, Summary(r))
		// The file's 2 GB went through the page cache dirty: written back now, not by the
		// kernel half a minute later, among the rounds.
		settleWriteback()
		p.ready = true
	}
	r, err := Run(ctx, "consume", ceilingConfig("sendfile", p.dir, 1024, p.sz.count1K, p.sz.cap, true), nil)
	if err != nil {
		return fmt.Errorf("sendfile %s: %w", MConsumePage, err)
	}
	p.rounds = append(p.rounds, r)
	logf("%-8s %-18s round %d: %s", "sendfile", MConsumePage, len(p.rounds), Summary(r))
	return nil
}

// finish puts each ceiling's run of median MB/s, when every round of it ran, and removes
// the sendfile ceiling's file. runCeilings does not measure what finish put.
func (p *ceilingsBeside) finish(s *Suite, want int) {
	if p.err == nil && len(p.rounds) == want && want > 0 {
		r := medianRun(p.rounds)
		r.Note = pairedNote + r.Note
		s.put("sendfile", MConsumePage, r)
	}
	if p.tcpErr == nil && len(p.tcp) == want && want > 0 {
		r := medianRun(p.tcp)
		r.Note = strings.TrimSuffix(tcpNote+"; "+r.Note, "; ")
		s.put("tcp", MConsumeMem, r)
	}
	os.RemoveAll(p.dir)
}

// tcpNote starts the note of the tcp ceiling's consume from memory measured alternating
// with sluice's.
const tcpNote = "alternating with sluice's consume from memory"

// tcpRound runs one round of the tcp ceiling's consume from memory, for the same reason
// the sendfile rounds alternate with sluice's: measured a minute later among the other
// ceilings, the ratio took the host's minute with it (sluice 2707 MB/s at the start of
// the 19:36 suite of 2026-12-06, on a host then slow enough that its burst was 1232 MB/s
// against 1585-2140 in the day's other suites, and tcp 4520 MB/s a minute later: 0.60).
// A failure is the ceiling's, as in pageRound.
func (p *ceilingsBeside) tcpRound(ctx context.Context, s *Suite, logf func(string, ...any)) {
	if p.tcpErr != nil {
		return
	}
	r, err := Run(ctx, "consume", ceilingConfig("tcp", p.dir, 1024, p.sz.count1K, p.sz.cap, true), nil)
	if err != nil {
		p.tcpErr = err
		s.Skipped["tcp alternating with sluice"] = err.Error()
		logf("tcp ceiling, alternating with sluice: %v (measured after sluice's runs instead)", err)
		return
	}
	p.tcp = append(p.tcp, r)
	logf("%-8s %-18s round %d: %s", "tcp", MConsumeMem, len(p.tcp), Summary(r))
}

// tcpBeside reports whether the tcp ceiling's consume from memory ran alternating with
// sluice's (tcpRound).
func (s *Suite) tcpBeside() bool {
	r := s.Results["tcp"][MConsumeMem]
	return r != nil && strings.HasPrefix(r.Note, tcpNote)
}

// pagePaired reports whether the sendfile ceiling's consume from the page cache ran
// alternating with sluice's (pageRound).
func (s *Suite) pagePaired() bool {
	r := s.Results["sendfile"][MConsumePage]
	return r != nil && strings.HasPrefix(r.Note, pairedNote)
}
