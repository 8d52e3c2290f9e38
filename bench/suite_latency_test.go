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
			if !ok || r.Rate != tc.rate || r.Partitions != 1 || r.Topic != "relay-"+tc.m || r.System != "relay" {
				t.Errorf("relay %s: %+v, %v", tc.m, r, ok)
			}
		}
	}
	// A system without its produce run has no half load.
	if _, ok := e2eConfig(s, &Server{Name: "nats"}, ME2EHalf, sz); ok {
		t.Fatal("nats ran at half load without a produce rate")
	}
}

// TestKeepMedianRounds pins the choice of the reported round: each system's median round
// by p99 (the lower middle of an even count), whole, with every round's latencies kept in
// run order without their CDFs; a round without latencies is left out.
func TestKeepMedianRounds(t *testing.T) {
	lat := func(p99 float64) *Result {
		return &Result{Latency: &Latency{P99: p99, P50: p99 / 4, CDF: []CDFPoint{{}}}, RecordsPerSec: p99}
	}
	s := &Suite{Results: map[string]map[string]*Result{}}
	three := []*Result{lat(900), lat(15000), lat(700)}
	two := []*Result{lat(300), lat(200), {}}
	s.keepMedianRounds(map[string]map[string][]*Result{
		"sluice": {ME2E10K: three},
		"relay":  {ME2E10K: two},
	})
	if got := s.Results["sluice"][ME2E10K]; got != three[0] {
		t.Errorf("sluice kept the round of p99 %v, want the median 900", got.Latency.P99)
	}
	if got := s.Results["relay"][ME2E10K]; got != two[1] {
		t.Errorf("relay kept the round of p99 %v, want the lower middle 200", got.Latency.P99)
	}
	if got := s.roundsP99("sluice", ME2E10K); got != "900 µs, 15.00 ms, 700 µs" {
		t.Errorf("sluice rounds %q", got)
	}
	if n := len(s.Rounds["relay"][ME2E10K]); n != 2 {
		t.Errorf("relay kept %d rounds, want the 2 with latencies", n)
	}
	for _, l := range s.Rounds["sluice"][ME2E10K] {
		if l.CDF != nil {
			t.Fatal("a round kept its CDF")
		}
	}
	if three[0].Latency.CDF == nil {
		t.Fatal("the kept result lost its CDF")
	}
	if n := s.e2eRounds(); n != 3 {
		t.Errorf("e2eRounds %d, want 3", n)
	}
	if got := s.roundsP99("kafka", ME2E10K); got != "—" {
		t.Errorf("kafka without rounds: %q", got)
	}
}
