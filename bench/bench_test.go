package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPacerTake(t *testing.T) {
	start := time.Unix(100, 0)
	s := start.UnixNano()
	f := func(rate float64, now int64, wantFirst, wantN int64) {
		t.Helper()
		p := NewPacer(start, rate)
		first, n := p.Take(now)
		if first != wantFirst || n != wantN {
			t.Errorf("rate %v at +%dns: first %d n %d, want %d %d", rate, now-s, first, n, wantFirst, wantN)
		}
	}
	f(1000, s-1, 0, 0)             // before the start
	f(1000, s, 0, 1)               // record 0 is due at the start
	f(1000, s+999_999, 0, 1)       // record 1 is due at +1ms
	f(1000, s+1_000_000, 0, 2)     // now it is
	f(1000, s+100_000_000, 0, 101) // a stall of 100 ms: 101 records due at once
	f(0, s-5, 0, 1)                // unpaced: always one
}

// TestCoordinatedOmission: a producer stalled for 100 ms at 1000 records/s sends the
// records it owes late; measured from their intended times, they show the stall.
func TestCoordinatedOmission(t *testing.T) {
	start := time.Unix(100, 0)
	p := NewPacer(start, 1000)
	rec := NewRecorder()
	now := start.UnixNano()
	const service = int64(10 * time.Microsecond)
	for i := 0; i < 1000; i++ { // one second of schedule
		if i == 500 {
			now += int64(100 * time.Millisecond) // the stall
		}
		first, n := p.Take(now)
		for j := range n {
			rec.Record(now + service - p.Intended(first+j))
		}
		now += int64(time.Millisecond)
	}
	l := rec.Summary(true)
	// About 100 of ~1000 records waited: p99 must be near the stall, not the service time.
	if l.P99 < 50_000 || l.Max < 99_000 {
		t.Fatalf("p99 %v µs, max %v µs: the stall is hidden", l.P99, l.Max)
	}
	if l.P50 > 100 {
		t.Fatalf("p50 %v µs, want the service time", l.P50)
	}
}

func TestRecorderPercentiles(t *testing.T) {
	rec := NewRecorder()
	for i := 1; i <= 1000; i++ {
		rec.Record(int64(i) * int64(time.Microsecond))
	}
	rec.Record(0)                       // clamped to 1 µs
	rec.Record(int64(10 * time.Minute)) // clamped to 1 min
	l := rec.Summary(false)
	near := func(name string, got, want float64) {
		t.Helper()
		if got < want*0.99 || got > want*1.01 {
			t.Errorf("%s = %v, want about %v", name, got, want)
		}
	}
	if l.Count != 1002 {
		t.Fatalf("count %d", l.Count)
	}
	near("p50", l.P50, 500)
	near("p99", l.P99, 990)
	near("max", l.Max, 60e6)
	if got := rec.IntervalP99(); got == 0 || rec.IntervalP99() != 0 {
		t.Fatalf("the interval histogram is not reset")
	}
	if NewRecorder().Summary(false) != nil {
		t.Fatal("an empty recorder has no summary")
	}
}

func TestResultJSON(t *testing.T) {
	r := &Result{Workload: "produce", Config: Config{System: "sluice", RecordSize: 1024}, Records: 2000, Bytes: 2000 * 1024}
	r.finish(2 * time.Second)
	if r.RecordsPerSec != 1000 || r.MBPerSec != 1.024 {
		t.Fatalf("rates %v %v", r.RecordsPerSec, r.MBPerSec)
	}
	rec := NewRecorder()
	rec.Record(int64(time.Millisecond))
	r.Latency = rec.Summary(true)
	path := filepath.Join(t.TempDir(), "r.json")
	if err := r.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := new(Result)
	if err := json.Unmarshal(raw, got); err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(r)
	b, _ := json.Marshal(got)
	if string(a) != string(b) {
		t.Fatalf("round trip:\n%s\n%s", a, b)
	}
	for _, key := range []string{`"records_per_sec":1000`, `"mb_per_sec":1.024`, `"p99_us":`, `"corrected":true`, `"errors":0`} {
		if !strings.Contains(string(a), key) {
			t.Errorf("JSON lacks %s: %s", key, a)
		}
	}
}

func TestRewriteSection(t *testing.T) {
	f := func(doc, section, want string) {
		t.Helper()
		if got := RewriteSection(doc, section); got != want {
			t.Errorf("RewriteSection(%q):\n got %q\nwant %q", doc, got, want)
		}
	}
	block := func(s string) string { return SectionBegin + "\n" + s + "\n" + SectionEnd + "\n" }
	f("", "new", block("new"))
	f("# hand\n", "new", "# hand\n\n"+block("new"))
	f("# hand", "new", "# hand\n\n"+block("new"))
	f("a\n"+block("old")+"b\n", "new\n", "a\n"+block("new")+"b\n")
	f("a\n"+SectionBegin+"\nx\n"+SectionEnd+"\n\ntail\n", "y", "a\n"+block("y")+"\ntail\n")
	// Twice is the same as once.
	once := RewriteSection("# hand\n", "s")
	f(once, "s", once)
}

func TestSplit(t *testing.T) {
	var sum int64
	for i := range 3 {
		sum += split(10, 3, i)
	}
	if sum != 10 || split(10, 3, 0) != 4 || split(10, 3, 2) != 3 {
		t.Fatalf("split")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		c  Config
		ok bool
	}{
		{Config{}, true},
		{Config{RecordSize: 4}, false},
		{Config{RecordSize: 2048, BatchBytes: 1024}, false},
		{Config{Rate: -1}, false},
		{Config{Compression: "snappy"}, false},
		{Config{Compression: "zstd", Count: 5}, true},
	} {
		c := tc.c
		c.EnsureDefaults()
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: %v", tc.c, err)
		}
	}
}
