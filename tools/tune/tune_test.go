package tune

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"sluice/memarena"
)

// TestRecommend: the arena leaves the page cache a quarter of memory and the system
// 1 GiB, never more than available memory allows, always a size the broker accepts;
// the host advice appears exactly when its condition holds.
func TestRecommend(t *testing.T) {
	cases := []struct {
		name     string
		h        Host
		arena    string
		prefault string
		advice   []string // substrings of the advice expected, in order
		noAdvice bool
		rotFsync bool
	}{
		{"a quiet 64 GiB host", Host{Cores: 16, MemTotal: 64 * gib, MemAvailable: 60 * gib, FSType: "xfs", NoFileSoft: 1 << 20, THP: "madvise", DirtyBytes: gib, DiskSize: 1 << 40, DiskFree: 1 << 39},
			"47GiB", "true", nil, true, false},
		{"a busy 24 GiB host", Host{Cores: 2, MemTotal: 24 * gib, MemAvailable: 8 * gib, FSType: "ext4", NoFileSoft: 1024, NoFileHard: 4096, THP: "always", DirtyRatio: 20, DiskRotational: true, DiskSize: 100 * gib, DiskFree: 5 * gib},
			"7GiB", "false", []string{"free space", "open-file limit", "transparent huge pages", "dirty"}, false, true},
		{"a small VM", Host{Cores: 1, MemTotal: 2 * gib, MemAvailable: 1 * gib, FSType: "tmpfs", NoFileSoft: 1 << 20},
			"256MiB", "false", []string{"on a disk"}, false, false},
	}
	for _, c := range cases {
		s, a := Recommend(c.h)
		got := map[string]string{}
		for _, x := range s {
			got[x.Key] = x.Value
			if x.Why == "" {
				t.Errorf("%s: %s without a reason", c.name, x.Key)
			}
		}
		if got["arena.size"] != c.arena || got["arena.prefault"] != c.prefault {
			t.Errorf("%s: arena %s prefault %s, want %s %s", c.name, got["arena.size"], got["arena.prefault"], c.arena, c.prefault)
		}
		if n, err := memarena.ParseSize(got["arena.size"]); err != nil || n%(256<<20) != 0 {
			t.Errorf("%s: the broker refuses arena.size = %s (%d): %v", c.name, got["arena.size"], n, err)
		}
		if _, ok := got["log.fsync_interval"]; ok != c.rotFsync {
			t.Errorf("%s: log.fsync_interval recommended %v, want %v", c.name, ok, c.rotFsync)
		}
		if c.noAdvice && len(a) != 0 {
			t.Errorf("%s: advice %+v for a host that needs none", c.name, a)
		}
		if len(a) != len(c.advice) && !c.noAdvice {
			t.Errorf("%s: %d pieces of advice, want %d: %+v", c.name, len(a), len(c.advice), a)
			continue
		}
		for i, want := range c.advice {
			if !strings.Contains(a[i].What, want) {
				t.Errorf("%s: advice %d is %q, want it about %q", c.name, i, a[i].What, want)
			}
		}
	}
}

// TestInspectThisHost reads this machine and prints what tune would say: every figure
// it can read on Linux is there, and the output is a config file of key = value lines.
func TestInspectThisHost(t *testing.T) {
	h, err := Inspect(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if h.Cores < 1 || h.MemTotal <= 0 || h.MemAvailable <= 0 || h.DiskSize <= 0 || h.FSType == "" || h.NoFileSoft == 0 {
		t.Fatalf("incomplete host figures: %+v", h)
	}
	s, a := Recommend(h)
	var b bytes.Buffer
	if err := Write(&b, h, s, a); err != nil {
		t.Fatal(err)
	}
	keys := 0
	for _, l := range strings.Split(b.String(), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if k, _, ok := strings.Cut(l, " = "); !ok || k == "" {
			t.Fatalf("not a config line: %q", l)
		}
		keys++
	}
	if keys != len(s) {
		t.Fatalf("%d config lines for %d settings", keys, len(s))
	}
	if testing.Verbose() {
		os.Stdout.Write(b.Bytes())
	}
}
