package codec

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"sluice/batch"
)

var codecs = []batch.Codec{batch.CodecNone, batch.CodecZstd, batch.CodecS2, batch.CodecLZ4}

// rec is one record as given to the Builder and as read back.
type rec struct {
	logical uint16
	ts      int64
	key     []byte
	value   []byte
	headers []batch.RecordHeader
}

var events = []string{"click", "view", "purchase", "signup", "logout", "search"}

// jsonValue returns about n bytes of JSON-like text: repeated field names, varying ids and
// numbers, so that it compresses moderately (about 3-5x), like real event payloads.
func jsonValue(r *rand.Rand, n int) []byte {
	b := make([]byte, 0, n+200)
	for len(b) < n {
		b = fmt.Appendf(b, `{"user":"u%07d","event":%q,"ts":%d,"amount":%d.%02d,"session":"%016x"},`,
			r.IntN(10_000_000), events[r.IntN(len(events))], 1_700_000_000_000+r.Int64N(1e9),
			r.IntN(10_000), r.IntN(100), r.Uint64())
	}
	return b[:n]
}

// jsonRecords returns n records whose encoded size is about size bytes each.
func jsonRecords(seed uint64, n, size int) []rec {
	r := rand.New(rand.NewPCG(seed, 1))
	recs := make([]rec, n)
	for i := range recs {
		key := fmt.Appendf(nil, "key-%08d", r.IntN(1e8))
		recs[i] = rec{uint16(i % 7), 1_700_000_000_000 + int64(i)*3, key, jsonValue(r, size-len(key)-10), nil}
	}
	return recs
}

// randomRecords returns n records of size random bytes, which no codec can shrink.
func randomRecords(seed uint64, n, size int) []rec {
	r := rand.New(rand.NewPCG(seed, 2))
	recs := make([]rec, n)
	for i := range recs {
		v := make([]byte, size)
		for j := range v {
			v[j] = byte(r.Uint32())
		}
		recs[i] = rec{1, int64(100 - i), nil, v, nil}
	}
	return recs
}

// headerRecords returns compressible records with headers, keys absent and timestamps
// going backwards.
func headerRecords() []rec {
	hdr := []batch.RecordHeader{{Key: []byte("trace-id"), Value: []byte("abcdef0123456789")}, {Value: []byte("x")}}
	var recs []rec
	for i := range 50 {
		recs = append(recs, rec{9, int64(1000 - i), nil, bytes.Repeat([]byte("payload "), 20), hdr[i%2:]})
	}
	return recs
}

// build builds a batch of recs and finishes it with c and codec.
func build(c *Compressor, codec batch.Codec, recs []rec) []byte {
	var b batch.Builder
	b.Reset(nil, 7, 3)
	for _, r := range recs {
		b.Add(r.logical, r.ts, r.key, r.value, r.headers...)
	}
	return c.Finish(&b, codec)
}

// readAll iterates it to the end and returns copies of its records.
func readAll(t testing.TB, it *batch.Iter) []rec {
	t.Helper()
	var recs []rec
	for it.Next() {
		recs = append(recs, clone(it.Record()))
	}
	if err := it.Err(); err != nil {
		t.Fatalf("iterating: %v", err)
	}
	return recs
}

// clone copies r, which points into the batch and the Iter, into a rec.
func clone(r *batch.Record) rec {
	var hs []batch.RecordHeader
	for hi := r.HeaderIter(); ; {
		h, ok := hi.Next()
		if !ok {
			break
		}
		hs = append(hs, batch.RecordHeader{Key: bytes.Clone(h.Key), Value: bytes.Clone(h.Value)})
	}
	return rec{r.Logical, r.Timestamp, bytes.Clone(r.Key), bytes.Clone(r.Value), hs}
}

func equalRecs(t testing.TB, got, want []rec) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.logical != w.logical || g.ts != w.ts || !bytes.Equal(g.key, w.key) || !bytes.Equal(g.value, w.value) ||
			len(g.headers) != len(w.headers) {
			t.Fatalf("record %d: got %+v, want %+v", i, g, w)
		}
		for j := range g.headers {
			if !bytes.Equal(g.headers[j].Key, w.headers[j].Key) || !bytes.Equal(g.headers[j].Value, w.headers[j].Value) {
				t.Fatalf("record %d header %d: got %+v, want %+v", i, j, g.headers[j], w.headers[j])
			}
		}
	}
}

// TestRoundTrip builds batches with every codec and reads them back: compressible ones
// are stored compressed and smaller, the others uncompressed, and every record returns.
func TestRoundTrip(t *testing.T) {
	sets := []struct {
		name       string
		recs       []rec
		compresses bool
	}{
		{"1KiB", jsonRecords(1, 60, 1<<10), true},
		{"100B", jsonRecords(2, 600, 100), true},
		{"headers", headerRecords(), true},
		{"10MiB", jsonRecords(6, 10, 1<<20), true}, // past zstd's block and window, lz4's 64 KiB
		{"random", randomRecords(3, 8, 1<<10), false},
		{"tiny", []rec{{0, 5, []byte("k"), nil, nil}}, false},
	}
	var c Compressor // shared by every case: a reused Compressor must not leak state
	var d Decompressor
	for _, set := range sets {
		plain := build(&c, batch.CodecNone, set.recs)
		for _, codec := range codecs {
			t.Run(set.name+"/"+codec.String(), func(t *testing.T) {
				b := build(&c, codec, set.recs)
				h, err := batch.Check(b)
				if err != nil {
					t.Fatal(err)
				}
				want := batch.CodecNone
				if set.compresses {
					want = codec
				}
				switch {
				case h.Codec != want:
					t.Fatalf("stored with %v, want %v", h.Codec, want)
				case want != batch.CodecNone && len(b) >= len(plain):
					t.Fatalf("compressed batch is %d bytes, uncompressed %d", len(b), len(plain))
				case want == batch.CodecNone && !bytes.Equal(b, plain):
					t.Fatal("batch stored uncompressed differs from Builder.Finish's")
				case int(h.UncompressedSize) != len(plain)-batch.HeaderSize:
					t.Fatalf("uncompressed size %d, want %d", h.UncompressedSize, len(plain)-batch.HeaderSize)
				}
				var it batch.Iter
				if err := d.Iter(&it, b); err != nil {
					t.Fatal(err)
				}
				equalRecs(t, readAll(t, &it), set.recs)
				if it.Header() != h {
					t.Fatalf("iterator header %+v, want %+v", it.Header(), h)
				}
			})
		}
	}
}

// TestRecordsNoneNoCopy checks that an uncompressed section is returned in place.
func TestRecordsNoneNoCopy(t *testing.T) {
	b := build(new(Compressor), batch.CodecNone, jsonRecords(4, 3, 100))
	h, err := batch.Check(b)
	if err != nil {
		t.Fatal(err)
	}
	var d Decompressor
	recs, err := d.Records(h, b)
	if err != nil {
		t.Fatal(err)
	}
	if &recs[0] != &b[batch.HeaderSize] || len(recs) != len(b)-batch.HeaderSize {
		t.Fatal("Records copied an uncompressed section")
	}
}

// TestCompressAppends checks that Compress keeps what dst holds, and that Seal over its
// output makes a batch that reads back.
func TestCompressAppends(t *testing.T) {
	recs := jsonRecords(5, 20, 300)
	plain := build(new(Compressor), batch.CodecNone, recs)
	h, err := batch.Check(plain)
	if err != nil {
		t.Fatal(err)
	}
	var c Compressor
	var d Decompressor
	for _, codec := range codecs {
		out := c.Compress([]byte("prefix"), codec, h.Records(plain))
		if !bytes.HasPrefix(out, []byte("prefix")) {
			t.Fatalf("%v: prefix lost", codec)
		}
		h2 := h
		h2.Codec = codec
		b, err := batch.Seal(nil, h2, out[len("prefix"):])
		if err != nil {
			t.Fatalf("%v: %v", codec, err)
		}
		var it batch.Iter
		if err := d.Iter(&it, b); err != nil {
			t.Fatalf("%v: %v", codec, err)
		}
		equalRecs(t, readAll(t, &it), recs)
	}
}

func TestCompressUnknownCodecPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(fmt.Sprint(r), "BUG: ") {
			t.Fatalf("recovered %v, want a BUG panic", r)
		}
	}()
	new(Compressor).Compress(nil, 5, []byte("records"))
}

func TestParseCodec(t *testing.T) {
	f := func(name string, want batch.Codec, wantErr bool) {
		t.Helper()
		got, err := ParseCodec(name)
		if wantErr {
			if !errors.Is(err, ErrUnknownName) || !strings.HasPrefix(err.Error(), "cannot parse codec ") {
				t.Fatalf("ParseCodec(%q): error %v, want ErrUnknownName", name, err)
			}
			return
		}
		if err != nil || got != want {
			t.Fatalf("ParseCodec(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	f("none", batch.CodecNone, false)
	f("zstd", batch.CodecZstd, false)
	f("s2", batch.CodecS2, false)
	f("lz4", batch.CodecLZ4, false)
	f("ZSTD", batch.CodecZstd, false)
	f("Lz4", batch.CodecLZ4, false)
	f("ſ2", 0, true)   // U+017F, which strings.EqualFold takes for s
	f("zſtd", 0, true) // likewise
	f("", 0, true)
	f("snappy", 0, true)
	f("gzip", 0, true)
	f("codec(5)", 0, true)
}
