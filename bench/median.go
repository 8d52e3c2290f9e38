package bench

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// consumeRounds is how many times the consume from the page cache runs, on each system
// and on its ceiling; the report keeps the run of median MB/s. One run of the suite's
// 2 M records lasts about half a second here, and single runs moved by up to 1.4×
// between neighbours (2026-12-06: sluice 2714-3592 MB/s, sendfile 3861-4771, four
// alternating rounds), so one run each decided the goal by chance. Five, not three: the
// median of three still moved the ratio to sendfile between 0.77 and 1.02 from one suite
// to the next.
const consumeRounds = 5

// medianRun returns the run of median MB/s of rs (a failed run counts as 0), with a Note
// giving every run's MB/s.
func medianRun(rs []*Result) *Result {
	if len(rs) == 0 {
		return nil
	}
	sorted := slices.Clone(rs)
	mbps := func(r *Result) float64 {
		if r.Errors > 0 {
			return 0
		}
		return r.MBPerSec
	}
	slices.SortStableFunc(sorted, func(a, b *Result) int { return cmp.Compare(mbps(a), mbps(b)) })
	keep := *sorted[len(sorted)/2]
	all := make([]string, len(rs))
	for i, r := range rs {
		all[i] = fmt.Sprintf("%.0f", mbps(r))
	}
	note := fmt.Sprintf("median of %d runs, MB/s in run order: %s", len(rs), strings.Join(all, ", "))
	if keep.Note != "" {
		note = keep.Note + "; " + note
	}
	keep.Note = note
	return &keep
}
