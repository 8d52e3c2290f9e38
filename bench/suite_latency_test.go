package bench

import "testing"

// TestE2EConfig pins what each end-to-end measurement runs at: half the system's own
// produce rate, or 10 000/s; the relay at the rate of sluice's run of the same
// measurement, one partition, its own topic; the topics trimmed by retention.
func TestE2EConfig(t *testing.T) {
	s := &Suite{Results: map[string]map[string]*Result{}}
	s.put("sluice", MProduce1K, &Result{RecordsPerSec: 800_000})
	s.put("kafka", MProduce1K, &Result{RecordsPerSec: 160_000})
	sz := sizesOf(true)
	sluice, kafka, relay := &Server{Name: "sluice", Addr: "a:1", MetricsAddr: "m:1"}, &Server{Name: "kafka", Addr: "k:1"}, &Server{Name: "relay", Addr: "r:1"}

	// Before sluice's run of a half-load measurement, the relay has no rate for it.
	if _, ok := e2eConfig(s, relay, ME2EHalf, sz); ok {
		t.Fatal("relay ran at half load without a sluice run to take the rate of")
	}
	if c, ok := e2eConfig(s, relay, ME2E10K, sz); !ok || c.Rate != e2eRate10K {
		t.Fatalf("relay at 10 000/s without sluice: %+v, %v", c, ok)
	}
	for _, tc := range []struct {
		srv   *Server
		m     string
		rate  float64
		parts int
		topic string
	}{
		{sluice, ME2EHalf, 400_000, suitePartitions, "be2e4"},
		{sluice, ME2EHalf1P, 400_000, 1, "be2e1"},
		{sluice, ME2E10K, e2eRate10K, suitePartitions, "be2e4"},
		{kafka, ME2EHalf, 80_000, suitePartitions, "be2e4"},
		{kafka, ME2EHalf1P, 80_000, 1, "be2e1"},
	} {
		c, ok := e2eConfig(s, tc.srv, tc.m, sz)
		if !ok || c.Rate != tc.rate || c.Partitions != tc.parts || c.Topic != tc.topic || c.System != tc.srv.Name ||
			c.Duration != sz.e2e || c.Warmup != sz.warmup || c.Linger != e2eLinger || c.MetricsAddr != tc.srv.MetricsAddr ||
			c.RetentionBytes != e2eRetention || c.SegmentBytes != e2eSegment {
			t.Errorf("%s %s: %+v, %v", tc.srv.Name, tc.m, c, ok)
		}
		if tc.srv == sluice {
			// sluice ran at a slightly different rate than asked: the relay takes the
			// rate sluice was asked for.
			s.put("sluice", tc.m, &Result{Config: c, RecordsPerSec: c.Rate * 0.98})
			r, ok := e2eConfig(s, relay, tc.m, sz)
			if !ok || r.Rate != tc.rate || r.Partitions != 1 || r.Topic != "relay-"+tc.m || r.System != "relay" || r.RetentionBytes != 0 {
				t.Errorf("relay %s: %+v, %v", tc.m, r, ok)
			}
		}
	}
	// A system without its produce run has no half load.
	if _, ok := e2eConfig(s, &Server{Name: "nats"}, ME2EHalf, sz); ok {
		t.Fatal("nats ran at half load without a produce rate")
	}
}

// TestKeepMedianRound pins the round the report keeps: the one in which sluice's p99 was
// its median (a round with errors or a missed rate counting as the worst, the lower middle
// of an even count), the same round for every system that has it, its own median for one
// that has not; every round listed in run order, the kept one marked.
func TestKeepMedianRound(t *testing.T) {
	res := func(p99 float64, errors int64) *Result {
		return &Result{Config: Config{Rate: 1000}, RecordsPerSec: 1000, Errors: errors,
			Latency: &Latency{P99: p99, P50: p99 / 4, CDF: []CDFPoint{{}}}}
	}
	// sluice's median is its second round (900 µs). Kafka's own median would be its
	// first round.
	sluice := []*Result{res(15000, 0), res(900, 0), res(700, 0)}
	kafka := []*Result{res(5000, 0), res(9000, 0), res(1000, 0)}
	relay := []*Result{res(300, 0), res(200, 0), nil} // failed in round 3
	nats := []*Result{res(100, 0), nil, nil}          // failed in round 2: its own median
	s := &Suite{Results: map[string]map[string]*Result{}}
	s.keepMedianRound(map[string]map[string][]*Result{
		"sluice": {ME2E10K: sluice}, "kafka": {ME2E10K: kafka}, "relay": {ME2E10K: relay}, "nats": {ME2E10K: nats},
	})
	for sys, want := range map[string]*Result{"sluice": sluice[1], "kafka": kafka[1], "relay": relay[1], "nats": nats[0]} {
		if got := s.Results[sys][ME2E10K]; got != want {
			t.Errorf("%s kept the round of p99 %v, want %v", sys, got.Latency.P99, want.Latency.P99)
		}
	}
	if got := s.roundsP99("sluice", ME2E10K); got != "15.00 ms, [900 µs], 700 µs" {
		t.Errorf("sluice rounds %q", got)
	}
	if got := s.roundsP99("relay", ME2E10K); got != "300 µs, [200 µs], — (not run)" {
		t.Errorf("relay rounds %q", got)
	}
	if got := s.roundsP99("kafka", ME2E10K); got != "5.00 ms, [9.00 ms], 1.00 ms" {
		t.Errorf("kafka rounds %q", got)
	}
	if got := s.roundsP99("nats", ME2E10K); got != "[100 µs], — (not run), — (not run)" {
		t.Errorf("nats rounds %q", got)
	}
	if sluice[1].Latency.CDF == nil {
		t.Fatal("the kept result lost its CDF")
	}
	if n := s.e2eRounds(); n != 3 {
		t.Errorf("e2eRounds %d, want 3", n)
	}
	if got := s.roundsP99("sluice", ME2EHalf); got != "—" {
		t.Errorf("a measurement without rounds: %q", got)
	}

	// A round that lost records ranks as the worst, whatever its p99 (by p99 alone the
	// median would be the third round).
	s = &Suite{Results: map[string]map[string]*Result{}}
	sluice = []*Result{res(500, 3), res(900, 0), res(800, 0)}
	s.keepMedianRound(map[string]map[string][]*Result{"sluice": {ME2EHalf: sluice}})
	if s.Results["sluice"][ME2EHalf] != sluice[1] {
		t.Errorf("kept the round of p99 %v, want 900 µs", s.Results["sluice"][ME2EHalf].Latency.P99)
	}
	if got := s.roundsP99("sluice", ME2EHalf); got != "500 µs (3 errors), [900 µs], 800 µs" {
		t.Errorf("sluice rounds %q", got)
	}

	// Without sluice, Kafka's median round sets the round; an even count keeps the
	// lower middle.
	s = &Suite{Results: map[string]map[string]*Result{}}
	kafka = []*Result{res(400, 0), res(300, 0)}
	relay = []*Result{res(50, 0), res(60, 0)}
	s.keepMedianRound(map[string]map[string][]*Result{"kafka": {ME2EHalf: kafka}, "relay": {ME2EHalf: relay}})
	if s.Results["kafka"][ME2EHalf] != kafka[1] || s.Results["relay"][ME2EHalf] != relay[1] {
		t.Errorf("kept kafka %v relay %v, want the second round of both", s.Results["kafka"][ME2EHalf].Latency.P99, s.Results["relay"][ME2EHalf].Latency.P99)
	}
}
