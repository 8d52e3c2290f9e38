package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPageCeiling runs the paired sendfile ceiling for real on a small file: the first
// round writes the file (the ceiling's produce), every round consumes all of it, finish
// keeps the median and removes the file; with a round missing it keeps nothing, so that
// runCeilings measures the ceiling itself.
func TestPageCeiling(t *testing.T) {
	ctx := context.Background()
	sz := suiteSizes{count1K: 20_000, cap: 10 * time.Second}
	for _, tc := range []struct {
		rounds, want int
		kept         bool
	}{{3, 3, true}, {2, 3, false}} {
		s := &Suite{Results: map[string]map[string]*Result{}}
		p := &pageCeiling{dir: filepath.Join(t.TempDir(), "ceiling-page"), sz: sz}
		for range tc.rounds {
			if err := p.round(ctx, s, t.Logf); err != nil {
				t.Fatal(err)
			}
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
		case tc.kept && (r == nil || !strings.HasPrefix(r.Note, "alternating with sluice's runs; median of 3 runs")):
			t.Fatalf("%d of %d rounds: kept %+v", tc.rounds, tc.want, r)
		case !tc.kept && r != nil:
			t.Fatalf("%d of %d rounds: kept %+v, want nothing", tc.rounds, tc.want, r)
		}
		if _, err := os.Stat(p.dir); !os.IsNotExist(err) {
			t.Fatalf("the ceiling's directory is still there: %v", err)
		}
	}
}
