package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pageSuite is an empty suite as RunSuite starts one.
func pageSuite() *Suite {
	return &Suite{Results: map[string]map[string]*Result{}, RSS: map[string]int64{}, Skipped: map[string]string{}}
}

// TestPageCeiling runs the paired sendfile ceiling for real on a small file: the first
// round writes the file (the ceiling's produce), every round consumes all of it (20 000
// records, not a multiple of the consumers' count of 256: each round ends at its count,
// not after idling), finish keeps the median and removes the file; with a round missing
// it keeps nothing, so that runCeilings measures the ceiling itself.
func TestPageCeiling(t *testing.T) {
	ctx := context.Background()
	sz := suiteSizes{count1K: 20_000, cap: 10 * time.Second}
	for _, tc := range []struct {
		rounds, want int
		kept         bool
	}{{3, 3, true}, {2, 3, false}} {
		s := pageSuite()
		p := &ceilingsBeside{dir: filepath.Join(t.TempDir(), "ceiling-page"), sz: sz}
		start := time.Now()
		for range tc.rounds {
			p.pageRound(ctx, s, t.Logf)
		}
		if p.err != nil {
			t.Fatal(p.err)
		}
		if d := time.Since(start); d > idleEnd {
			t.Errorf("%d rounds of 20 000 records took %v: a round waited for the consumers to idle", tc.rounds, d)
		}
		if r := s.Results["sendfile"][MProduce1K]; r == nil || r.Records != sz.count1K {
			t.Fatalf("the ceiling's produce: %+v", r)
		}
		for i, r := range p.rounds {
			if r.Records != sz.count1K || r.Bytes != sz.count1K*1024 || r.Errors != 0 {
				t.Fatalf("round %d: %+v", i+1, r)
			}
		}
		p.finish(s, tc.want)
		r := s.Results["sendfile"][MConsumePage]
		switch {
		case tc.kept && (r == nil || !strings.HasPrefix(r.Note, pairedNote+"median of 3 runs") || !s.pagePaired()):
			t.Fatalf("%d of %d rounds: kept %+v", tc.rounds, tc.want, r)
		case !tc.kept && (r != nil || s.pagePaired()):
			t.Fatalf("%d of %d rounds: kept %+v, want nothing", tc.rounds, tc.want, r)
		}
		if _, err := os.Stat(p.dir); !os.IsNotExist(err) {
			t.Fatalf("the ceiling's directory is still there: %v", err)
		}
	}
}

// TestPageCeilingFails: a ceiling that cannot run (its directory cannot be made: a file
// stands where its parent should be) stops pairing without an error for sluice's runs,
// says why in Skipped, keeps nothing, and runs no later round.
func TestPageCeilingFails(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := pageSuite()
	p := &ceilingsBeside{dir: filepath.Join(blocker, "ceiling-page"), sz: suiteSizes{count1K: 1000, cap: 10 * time.Second}}
	for range consumeRounds {
		p.pageRound(context.Background(), s, t.Logf)
	}
	p.finish(s, consumeRounds)
	if p.err == nil || len(p.rounds) != 0 || s.Skipped["sendfile alternating with sluice"] == "" {
		t.Fatalf("err %v, %d rounds, skipped %q", p.err, len(p.rounds), s.Skipped)
	}
	if s.Results["sendfile"] != nil || s.pagePaired() {
		t.Fatalf("kept %+v", s.Results["sendfile"])
	}
}

// TestRunCeilingsPaired: runCeilings measures no sendfile step when the ceiling ran
// alternating with sluice (its results stay those of the pairing), and no tcp consume
// when its rounds alternated with sluice's; it measures them itself when the pairing kept
// nothing; the report says which.
func TestRunCeilingsPaired(t *testing.T) {
	ctx := context.Background()
	sz := suiteSizes{count1K: 4_000, count100: 4_000, cap: 10 * time.Second}
	o := &SuiteOptions{Only: []string{"consume"}}
	logf := func(string, ...any) {}
	for _, full := range []bool{true, false} {
		s := pageSuite()
		p := &ceilingsBeside{dir: filepath.Join(t.TempDir(), "ceiling-page"), sz: sz}
		rounds := consumeRounds
		if !full {
			rounds--
		}
		for range rounds {
			p.pageRound(ctx, s, logf)
		}
		for range rounds {
			p.tcpRound(ctx, s, logf)
		}
		if r := s.Results["tcp"][MConsumeMem]; r != nil {
			t.Fatalf("the tcp rounds put a result before finish: %+v", r)
		}
		p.finish(s, consumeRounds)
		if r := s.Results["tcp"][MConsumeMem]; full && (r == nil || r.Records != sz.count1K || !strings.HasPrefix(r.Note, tcpNote) || !s.tcpBeside()) {
			t.Fatalf("tcp alternating with sluice: %+v", r)
		}
		prod, cons := s.Results["sendfile"][MProduce1K], s.Results["sendfile"][MConsumePage]
		tcp := s.Results["tcp"][MConsumeMem]
		if err := runCeilings(ctx, s, o, filepath.Join(t.TempDir(), "ceiling"), sz, logf); err != nil {
			t.Fatal(err)
		}
		gotProd, gotCons := s.Results["sendfile"][MProduce1K], s.Results["sendfile"][MConsumePage]
		switch {
		case full && (gotProd != prod || gotCons != cons || !s.pagePaired()):
			t.Fatalf("paired: runCeilings measured the sendfile ceiling again: %+v, %+v", gotProd, gotCons)
		case !full && (gotProd == prod || gotCons == nil || s.pagePaired()):
			t.Fatalf("not paired: runCeilings did not measure the sendfile ceiling: %+v, %+v", gotProd, gotCons)
		}
		gotTCP := s.Results["tcp"][MConsumeMem]
		switch {
		case gotTCP == nil:
			t.Fatalf("paired %v: no tcp ceiling", full)
		case full && (gotTCP != tcp || !s.tcpBeside()):
			t.Fatalf("paired: runCeilings measured the tcp consume again: %+v", gotTCP)
		case !full && s.tcpBeside():
			t.Fatalf("not paired: the tcp consume says it alternated with sluice's: %+v", gotTCP)
		}
		md := s.Markdown(nil)
		if says := strings.Contains(md, "whose rounds alternate with sluice's"); says != full {
			t.Fatalf("paired %v: the report says the rounds alternated: %v", full, says)
		}
		if says := strings.Contains(md, "the tcp ceiling's consume rounds alternate with sluice's"); says != full {
			t.Fatalf("paired %v: the report says the tcp consume alternated with sluice's: %v", full, says)
		}
	}
}
