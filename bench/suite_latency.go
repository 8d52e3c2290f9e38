package bench

import (
	"context"
	"fmt"
	"os"
)

// runLatency runs the end-to-end measurements with every system's server up at once,
// each measurement of every system back to back: sluice, the relay at sluice's rate,
// Kafka, then NATS; all of that sz.e2eRounds times, and the report keeps one round of
// each measurement, the same for every system (keepMedianRound, rounds.go). Run system after system, minutes apart, they met different hosts: on
// 2026-12-03 the hypervisor stole 20-40 % of the cores during sluice's and the relay's
// runs and 2-6 % during Kafka's, ten minutes later, and a latency tail on two shared
// cores is mostly the wait for one (cpu.go records both per run). Side by side, the
// runs of one measurement follow each other within a minute. A server idles while
// another is measured (sluice about 0.03 of a core).
//
// Each server starts afresh (its throughput runs' data removed), Kafka's first so that
// its JIT has the others' start-up to settle; a system that failed or was skipped before
// is left out, and one that fails here is left out of the measurements and rounds after
// it. The
// half load is half of the system's own 1 KiB produce rate of this suite; the relay
// takes sluice's. It returns only the context's error: the others are in s.Skipped.
func runLatency(ctx context.Context, s *Suite, o *SuiteOptions, servers []*Server, relayDir string, sz suiteSizes, logf func(string, ...any)) error {
	var up []*Server // started, in run order
	stop := func(srv *Server) {
		srv.Stop()
		s.RSS[srv.Name] = max(s.RSS[srv.Name], srv.PeakRSS)
		os.RemoveAll(srv.Dir)
	}
	defer func() {
		for _, srv := range up {
			stop(srv)
		}
	}()
	byName := map[string]*Server{}
	for _, srv := range servers {
		if o.runs(srv.Name) && s.Skipped[srv.Name] == "" && s.Results[srv.Name][MProduce1K] != nil {
			byName[srv.Name] = srv
		}
	}
	if byName["sluice"] != nil || len(byName) == 0 {
		// The relay runs at sluice's rates, or only at the fixed rate without sluice.
		byName["relay"] = RelayServer(o.SluiceBin, relayDir, "127.0.0.1:19600")
	}
	for _, name := range []string{"kafka", "nats", "sluice", "relay"} { // the start order
		srv := byName[name]
		if srv == nil {
			continue
		}
		os.RemoveAll(srv.Dir)
		srv.PeakRSS = 0 // the sustained runs' peak is theirs (sustain.go); RSS keeps the largest
		if err := srv.Start(ctx); err != nil {
			logf("%s: cannot start for the latency runs: %v", name, err)
			s.Skipped[name+" latency"] = err.Error()
			os.RemoveAll(srv.Dir)
			delete(byName, name)
		}
	}
	for _, name := range []string{"sluice", "relay", "kafka", "nats"} { // the run order
		if srv := byName[name]; srv != nil {
			up = append(up, srv)
		}
	}
	failed := map[string]bool{}
	rounds := map[string]map[string][]*Result{} // by system and measurement, by round (nil: none)
	for round := range sz.e2eRounds {
		for _, run := range e2eRuns {
			for _, srv := range up {
				if failed[srv.Name] {
					continue
				}
				c, ok := e2eConfig(s, srv, run.m, sz)
				if !ok {
					continue
				}
				settleWriteback()
				r, err := Run(ctx, "e2e", c, nil)
				srv.SampleRSS()
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if err != nil {
					// Only this system's later measurements are lost, not the others'.
					failed[srv.Name] = true
					s.Skipped[srv.Name+" latency"] = failedNote(run.m, round, rounds[srv.Name] != nil, err)
					logf("%s %s failed: %v", srv.Name, run.m, err)
					continue
				}
				s.put(srv.Name, run.m, r) // the relay's next run takes sluice's rate from it
				if rounds[srv.Name] == nil {
					rounds[srv.Name] = map[string][]*Result{}
				}
				if rounds[srv.Name][run.m] == nil {
					rounds[srv.Name][run.m] = make([]*Result, sz.e2eRounds)
				}
				rounds[srv.Name][run.m][round] = r
				logf("%-8s %-18s round %d: %s", srv.Name, run.m, round+1, Summary(r))
			}
		}
	}
	s.keepMedianRound(rounds)
	return nil
}

// e2eConfig is the configuration of measurement m (one of e2eRuns) against srv: 4
// partitions (1 for ME2EHalf1P; the relay has none), at half the system's 1 KiB produce
// rate or at e2eRate10K; the relay at the rate of sluice's run of m (e2eRate10K without
// one); false when there is no rate to run at.
func e2eConfig(s *Suite, srv *Server, m string, sz suiteSizes) (Config, bool) {
	rate := float64(e2eRate10K)
	switch {
	case srv.Name == "relay":
		// At the rate of sluice's run of the same measurement, just before it.
		if ref := s.Results["sluice"][m]; ref != nil {
			rate = ref.Config.Rate
		} else if m != ME2E10K {
			return Config{}, false
		}
	case m != ME2E10K:
		p := s.Results[srv.Name][MProduce1K]
		if p == nil || p.RecordsPerSec <= 0 {
			return Config{}, false
		}
		rate = p.RecordsPerSec / 2
	}
	parts := suitePartitions
	if m == ME2EHalf1P {
		parts = 1
	}
	c := baseConfig(srv.Name, srv.Addr, fmt.Sprintf("be2e%d", parts), 1024)
	if srv.Name == "relay" {
		c.Topic, parts = "relay-"+m, 1 // the relay has no partitions
	}
	c.Partitions, c.Rate, c.Duration, c.Warmup, c.Linger = parts, rate, sz.e2e, sz.warmup, e2eLinger
	if srv.Name != "relay" { // which keeps nothing
		// Retention keeps the rounds within the disk (at most about 20 GiB for sluice):
		// at sluice's half load (about 700 MB/s) each run writes about 7 GB to its
		// topic, and a deployed broker trims as it writes.
		c.RetentionBytes, c.SegmentBytes = e2eRetention, e2eSegment
	}
	c.MetricsAddr = srv.MetricsAddr // sluice's: the broker's stages (stages.go)
	c.ServerPid = srv.Pid()
	return c, true
}

// failedNote is the report's line on a system whose end-to-end run m failed in round
// (from 0): with rounds before it (ran), the report still shows those, and says so.
func failedNote(m string, round int, ran bool, err error) string {
	if !ran {
		return fmt.Sprintf("%s, round %d: %v", m, round+1, err)
	}
	return fmt.Sprintf("%s failed in round %d, and its later runs were not made (the latency rows show the rounds it ran, the others marked not run): %v", m, round+1, err)
}
