package local

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseName classifies arbitrary names found in a partition directory, and makes
// segment file names of arbitrary base offsets with segmentName. It checks: no panic; a
// name parseName takes for a segment file (.log, .index, .timeindex) has a base offset not
// below zero and is exactly the name segmentName gives that base and suffix (Open lists
// the segments in name order and takes it for offset order; any other name is a foreign
// file, refused with a clear error); a leftover ends in .tmp or .deleted; only
// recovery-point is the recovery point; other kinds have base 0; and segmentName's name
// of any base not below zero parses back to that base and its suffix's kind.
func FuzzParseName(f *testing.F) {
	for _, base := range []int64{0, 4096, 1<<63 - 1} {
		for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			f.Add(filepath.Base(segmentName("p", base, suffix)), base)
		}
	}
	for _, name := range []string{
		"", ".", recoveryPointName, recoveryPointName + ".tmp", "00000000000000000000.log.tmp", "00000000000000000000.log" + deletedSuffix,
		"00000000000000000000", "00000000000000000000.", "00000000000000000000.txt", "0000000000000000000.log", "000000000000000000000.log",
		"-0000000000000000001.log", "99999999999999999999.log", "00000000000000000000.log.log", "lost+found",
	} {
		f.Add(name, int64(7))
	}
	kinds := map[string]fileKind{logSuffix: kindLog, indexSuffix: kindIndex, timeIndexSuffix: kindTimeIndex}
	f.Fuzz(func(t *testing.T, name string, base int64) {
		switch kind, b := parseName(name); kind {
		case kindLog, kindIndex, kindTimeIndex:
			suffix := name[strings.IndexByte(name, '.'):]
			if b < 0 || kinds[suffix] != kind || filepath.Base(segmentName("p", b, suffix)) != name {
				t.Fatalf("name %q taken for kind %d of the segment at %d, whose file is named %q",
					name, kind, b, filepath.Base(segmentName("p", b, suffix)))
			}
		case kindLeftover:
			if b != 0 || !strings.HasSuffix(name, ".tmp") && !strings.HasSuffix(name, deletedSuffix) {
				t.Fatalf("name %q taken for a leftover (base %d)", name, b)
			}
		case kindRecoveryPoint:
			if b != 0 || name != recoveryPointName {
				t.Fatalf("name %q taken for the recovery point (base %d)", name, b)
			}
		case kindForeign:
			if b != 0 {
				t.Fatalf("foreign name %q has base %d", name, b)
			}
		default:
			t.Fatalf("name %q classified as unknown kind %d", name, kind)
		}
		if base < 0 {
			return
		}
		for suffix, want := range kinds {
			n := filepath.Base(segmentName("p", base, suffix))
			if kind, b := parseName(n); kind != want || b != base {
				t.Fatalf("segment file %q of base %d parses as kind %d, base %d", n, base, kind, b)
			}
		}
	})
}
