package hdfs

import (
	"math"
	"testing"
)

// FuzzParseName parses arbitrary names found in a partition's HDFS directory, and makes
// names of arbitrary base offsets and epochs with fileName. It checks: no panic; a name
// parseName takes for a data file has a base offset not below zero and is exactly the
// name fileName gives that base and epoch (any other name is not a data file: it is
// left out of the listing the readers trust); fileName's name of any base not below zero
// parses back to that base and epoch.
func FuzzParseName(f *testing.F) {
	for _, c := range []struct {
		base  int64
		epoch uint64
	}{{0, 0}, {0, 1}, {4096, 7}, {math.MaxInt64, math.MaxUint64}} {
		f.Add(fileName(c.base, c.epoch), c.base, c.epoch)
	}
	for _, name := range []string{
		"", ".log", "x.log", fileName(5, 1) + indexSuffix, fileName(5, 1) + ".tmp", "00000000000000000005.1.log",
		"-0000000000000000005.00000000000000000001.log", "00000000000000000005-00000000000000000001.log",
		"99999999999999999999.00000000000000000001.log", "00000000000000000005.99999999999999999999.log",
	} {
		f.Add(name, int64(1), uint64(1))
	}
	f.Fuzz(func(t *testing.T, name string, base int64, epoch uint64) {
		if b, e, ok := parseName(name); ok {
			if b < 0 || fileName(b, e) != name {
				t.Fatalf("name %q taken for the data file of base %d and epoch %d, which is named %q", name, b, e, fileName(b, e))
			}
		} else if b != 0 || e != 0 {
			t.Fatalf("name %q refused with base %d and epoch %d", name, b, e)
		}
		if base < 0 {
			return
		}
		if b, e, ok := parseName(fileName(base, epoch)); !ok || b != base || e != epoch {
			t.Fatalf("fileName(%d, %d) = %q parses as %d, %d, %v", base, epoch, fileName(base, epoch), b, e, ok)
		}
	})
}
