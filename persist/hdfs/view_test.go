package hdfs

import (
	"bytes"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

type fakeInfo struct {
	name string
	size int64
}

func (f fakeInfo) Name() string       { return f.name }
func (f fakeInfo) Size() int64        { return f.size }
func (f fakeInfo) Mode() fs.FileMode  { return 0o644 }
func (f fakeInfo) ModTime() time.Time { return time.Time{} }
func (f fakeInfo) IsDir() bool        { return false }
func (f fakeInfo) Sys() any           { return nil }

// TestTrusted checks the trust rules on listings (pure: no HDFS needed for names).
func TestTrusted(t *testing.T) {
	list := func(names ...string) []os.FileInfo {
		var out []os.FileInfo
		for _, n := range names {
			out = append(out, fakeInfo{n, 100})
		}
		return out
	}
	type want struct {
		base, end int64
		epoch     uint64
		index     bool
	}
	for _, tc := range []struct {
		name  string
		files []os.FileInfo
		want  []want
	}{
		{"one epoch, rolled and retried", list(fileName(0, 1), fileName(0, 1)+indexSuffix, fileName(50, 1), fileName(70, 1)),
			[]want{{0, 50, 1, true}, {50, 70, 1, false}, {70, math.MaxInt64, 1, false}}},
		{"a newer epoch at the same base replaces an empty start", list(fileName(10, 1), fileName(10, 2)),
			[]want{{10, math.MaxInt64, 2, false}}},
		{"an older epoch after a newer one is fenced", list(fileName(0, 1), fileName(40, 2), fileName(60, 1), fileName(90, 2)),
			[]want{{0, 40, 1, false}, {40, 90, 2, false}, {90, math.MaxInt64, 2, false}}},
		{"other names are ignored", list("x.log", fileName(5, 1)+".tmp", "00000000000000000005.1.log", fileName(5, 1)),
			[]want{{5, math.MaxInt64, 1, false}}},
		{"nothing", nil, nil},
	} {
		got := trusted(tc.files)
		if len(got) != len(tc.want) {
			t.Fatalf("%s: %+v", tc.name, got)
		}
		for i, w := range tc.want {
			g := got[i]
			if g.base != w.base || g.end != w.end || g.epoch != w.epoch || g.index != w.index {
				t.Fatalf("%s: file %d is %+v, want %+v", tc.name, i, g, w)
			}
		}
	}
}

// TestWalkBatches: batch boundaries are found across any cut, and data that is not
// whole consecutive batches from the expected offset is refused.
func TestWalkBatches(t *testing.T) {
	data, next := batches(7, 200, "a")
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		var bases []int64
		got, n, err := walkBatches(cut(rng, data), 7, func(_, base int64) { bases = append(bases, base) })
		if err != nil || got != next || n != int64(len(data)) || bases[0] != 7 {
			t.Fatalf("walk: %d %d %v", got, n, err)
		}
	}
	for _, bad := range [][][]byte{
		{data[:len(data)-1]},    // cut short
		{data, data[:10]},       // trailing bytes
		{batchAt(8, "a")},       // wrong offset
		{append(data, data...)}, // offsets repeat
	} {
		if _, _, err := walkBatches(bad, 7, func(_, _ int64) {}); err == nil {
			t.Fatalf("walk accepted %d bytes of bad data", len(bad[0]))
		}
	}
}

// TestIndexRoundTrip encodes an index, decodes it, and refuses it damaged.
func TestIndexRoundTrip(t *testing.T) {
	ix := &fileIndex{next: 500, size: 9000, entries: []indexEntry{{100, 0}, {200, 4000}, {300, 8000}}}
	b := ix.encode()
	got, err := decodeIndex(b, 100)
	if err != nil || got.next != 500 || got.size != 9000 || len(got.entries) != 3 || got.seek(250) != (indexEntry{200, 4000}) || got.seek(50) != (indexEntry{100, 0}) {
		t.Fatalf("%+v %v", got, err)
	}
	for i := range b {
		d := bytes.Clone(b)
		d[i] ^= 1
		if _, err := decodeIndex(d, 100); err == nil {
			t.Fatalf("a flipped bit at %d went unnoticed", i)
		}
	}
	if _, err := decodeIndex(b, 101); err == nil {
		t.Fatal("an index of another base was taken")
	}
}

// FuzzDecodeIndex: any bytes decode to an index that passes its own checks, or to an
// error; never a panic.
func FuzzDecodeIndex(f *testing.F) {
	f.Add((&fileIndex{next: 10, size: 100, entries: []indexEntry{{0, 0}, {5, 50}}}).encode())
	f.Add([]byte("SLIX"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ix, err := decodeIndex(b, 0)
		if err != nil {
			return
		}
		if len(ix.entries) == 0 || ix.entries[0] != (indexEntry{0, 0}) {
			t.Fatalf("bad index accepted: %+v", ix)
		}
		if !bytes.Equal(ix.encode(), b) {
			t.Fatal("an accepted index does not encode to its bytes")
		}
	})
}

// TestArrivalsLag: the lag is the age of the oldest offset not acknowledged, whatever the
// shipper did since it was last caught up.
func TestArrivalsLag(t *testing.T) {
	var a arrivals
	t0 := time.Unix(1000, 0)
	a.note(10, 0, t0)                     // offsets 0-9 by t0
	a.note(20, 0, t0.Add(time.Second))    // 10-19 by t0+1s
	a.note(30, 10, t0.Add(2*time.Second)) // HDFS has 0-9
	if got := a.lag(10, t0.Add(3*time.Second)); got != 2*time.Second {
		t.Fatalf("lag %v, want 2s (offset 10 arrived at t0+1s)", got)
	}
	if got := a.lag(30, t0.Add(3*time.Second)); got != 0 {
		t.Fatalf("caught up, lag %v", got)
	}
	for i := range 2 * arrivalsKept {
		a.note(int64(40+i), 10, t0.Add(time.Duration(3+i)*time.Second))
	}
	if len(a.samples) > arrivalsKept {
		t.Fatalf("%d samples kept", len(a.samples))
	}
	if got := a.lag(10, t0.Add(time.Hour)); got != time.Hour-time.Second {
		t.Fatalf("lag %v past the kept samples, want the oldest's age", got)
	}
}
