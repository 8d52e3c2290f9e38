package local

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzParseSyncMode parses arbitrary log.fsync values and the String of arbitrary sync
// modes. It checks: no panic; a value ParseSyncMode takes is exactly the String of the
// mode it returns, one of the three (the names are lower case and matched as they are:
// "GROUP" is refused, unlike codec names); a refused value gives mode 0 and an error
// that quotes it; and the String of every known mode parses back to it, of every other
// ("SyncMode(3)") is refused.
func FuzzParseSyncMode(f *testing.F) {
	for _, m := range []SyncMode{SyncGroup, SyncEveryBatch, SyncNever} {
		f.Add(m.String(), int(m))
	}
	for _, junk := range []string{"", "GROUP", "Batch", "always", "never ", "group\x00", "SyncMode(3)", "\xff"} {
		f.Add(junk, -1)
	}
	f.Fuzz(func(t *testing.T, s string, v int) {
		m, err := ParseSyncMode(s)
		if err != nil {
			if m != 0 || !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("ParseSyncMode(%q) = %v, %v: want 0 and an error naming the input", s, m, err)
			}
		} else if m < SyncGroup || m > SyncNever || m.String() != s {
			t.Fatalf("ParseSyncMode(%q) = %v (%d), whose name is %q", s, m, int(m), m.String())
		}
		m = SyncMode(v)
		m2, err := ParseSyncMode(m.String())
		if known := m >= SyncGroup && m <= SyncNever; known && (err != nil || m2 != m) || !known && err == nil {
			t.Fatalf("mode %d's name %q parses as %v, %v", v, m.String(), m2, err)
		}
	})
}

// TestParseSyncMode: the three names, as String writes them, and nothing else.
func TestParseSyncMode(t *testing.T) {
	for _, m := range []SyncMode{SyncGroup, SyncEveryBatch, SyncNever} {
		if got, err := ParseSyncMode(m.String()); err != nil || got != m {
			t.Errorf("ParseSyncMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	for _, bad := range []string{"", "GROUP", "Batch", "always", "never ", "SyncMode(3)"} {
		if _, err := ParseSyncMode(bad); err == nil || !strings.Contains(err.Error(), strconv.Quote(bad)) {
			t.Errorf("ParseSyncMode(%q): %v, want an error naming it", bad, err)
		}
	}
}
