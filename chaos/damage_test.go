package chaos

import (
	"errors"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"sluice/internal/testbroker"
	"sluice/persist/local"
	"sluice/tools/segment"
)

// TestInjectedDamageIsFoundAndRepaired: every torn tail and bit flip the harness injects
// into a real partition log (written by the log itself, closed cleanly, so all of it is
// acknowledged) is found by the same checks the broker's recovery makes, and the repair
// the harness runs as an operator leaves no damage behind, cut at or below the first
// offset the harness counts as destroyed.
func TestInjectedDamageIsFoundAndRepaired(t *testing.T) {
	bin := testbroker.Binary(t)
	for _, kind := range []damageKind{torn, bitflip} {
		for seed := range uint64(8) {
			dir := filepath.Join(t.TempDir(), "data", "t", "0")
			if err := segment.Demo(dir, 100, 4096); err != nil {
				t.Fatal(err)
			}
			d, err := injectDamage(dir, kind, rand.New(rand.NewPCG(seed, 1)))
			if err != nil {
				t.Fatal(err)
			}
			if d.from < 0 {
				t.Fatalf("%s seed %d: nothing damaged: %s", kind, seed, d.note)
			}
			problems, err := local.Inspect(nil, dir, nil)
			if err != nil || len(problems) == 0 {
				t.Fatalf("%s seed %d: %s went unnoticed (%v)", kind, seed, d.note, err)
			}
			at, err := repairDamage(bin, dir)
			if err != nil {
				t.Fatal(err)
			}
			if at < 0 || at > d.from {
				t.Fatalf("%s seed %d: %s; repaired at %d", kind, seed, d.note, at)
			}
			problems, err = local.Inspect(nil, dir, nil)
			for _, p := range problems {
				var de *local.DamageError
				if errors.As(p, &de) {
					t.Fatalf("%s seed %d: damage left after the repair: %v", kind, seed, p)
				}
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}
