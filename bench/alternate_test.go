package bench

import (
	"errors"
	"strings"
	"testing"
)

// TestAlternate checks the order of the suite's paired rounds: consume from memory runs
// sluice's round first, consume from the page cache the ceiling's (its first round writes
// the ceiling's file), and after that each side precedes the other in turn; no ceiling
// without pc; the first error of ours stops the rounds.
func TestAlternate(t *testing.T) {
	order := func(ceilingLeads, withCeiling bool, failAt int) (string, error) {
		var b strings.Builder
		var ceiling func()
		if withCeiling {
			ceiling = func() { b.WriteByte('C') }
		}
		err := alternate(5, ceilingLeads, func(i int) error {
			if i == failAt {
				return errors.New("round failed")
			}
			b.WriteByte('S')
			return nil
		}, ceiling)
		return b.String(), err
	}
	for _, tc := range []struct {
		name                      string
		ceilingLeads, withCeiling bool
		failAt                    int
		want                      string
		wantErr                   bool
	}{
		{"memory", false, true, -1, "SCCSSCCSSC", false},
		{"page cache", true, true, -1, "CSSCCSSCCS", false},
		{"no ceiling", true, false, -1, "SSSSS", false},
		{"memory, third round fails", false, true, 2, "SCCS", true},
		{"page cache, second round fails", true, true, 1, "CS", true},
	} {
		got, err := order(tc.ceilingLeads, tc.withCeiling, tc.failAt)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%s: order %q, error %v; want %q, error %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}
