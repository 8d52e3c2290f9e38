package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
)

// rec is a record as a test writes and reads it.
type rec struct {
	logical    uint16
	ts         int64
	key, value []byte
	headers    []RecordHeader
}

// build encodes recs as one batch appended to dst.
func build(dst []byte, producerID int64, seq int32, recs []rec) []byte {
	var b Builder
	b.Reset(dst, producerID, seq)
	for _, r := range recs {
		b.Add(r.logical, r.ts, r.key, r.value, r.headers...)
	}
	return b.Finish()
}

// readAll iterates a batch (or, with records != nil, a decompressed section) and returns
// copies of its records.
func readAll(t *testing.T, it *Iter) []rec {
	t.Helper()
	var out []rec
	for i := 0; it.Next(); i++ {
		r := it.Record()
		if want := it.Header().BaseOffset + int64(i); r.Offset != want {
			t.Fatalf("record %d: offset %d, want %d", i, r.Offset, want)
		}
		got := rec{r.Logical, r.Timestamp, bytes.Clone(r.Key), bytes.Clone(r.Value), nil}
		for hi := r.HeaderIter(); ; {
			h, ok := hi.Next()
			if !ok {
				break
			}
			got.headers = append(got.headers, RecordHeader{bytes.Clone(h.Key), bytes.Clone(h.Value)})
		}
		out = append(out, got)
	}
	if err := it.Err(); err != nil {
		t.Fatalf("iterating: %v", err)
	}
	return out
}

func equalRecs(t *testing.T, got, want []rec) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		ok := g.logical == w.logical && g.ts == w.ts && bytes.Equal(g.key, w.key) &&
			bytes.Equal(g.value, w.value) && len(g.headers) == len(w.headers)
		for j := 0; ok && j < len(w.headers); j++ {
			ok = bytes.Equal(g.headers[j].Key, w.headers[j].Key) && bytes.Equal(g.headers[j].Value, w.headers[j].Value)
		}
		if !ok {
			t.Fatalf("record %d: got %+v, want %+v", i, g, w)
		}
	}
}

func manyRecs(n int) []rec {
	recs := make([]rec, n)
	for i := range recs {
		recs[i] = rec{uint16(i), 1_700_000_000_000 + int64(i%7) - 3, []byte{byte(i), byte(i >> 8)}, bytes.Repeat([]byte{'v'}, i%300), nil}
	}
	return recs
}

func TestRoundTrip(t *testing.T) {
	hdrs := []RecordHeader{{[]byte("trace"), []byte("abc")}, {nil, nil}, {[]byte("k"), bytes.Repeat([]byte{1}, 200)}}
	tests := []struct {
		name string
		recs []rec
	}{
		{"one", []rec{{1, 1000, []byte("key"), []byte("value"), nil}}},
		{"empty key and value", []rec{{0, 0, nil, nil, nil}, {0, 0, []byte{}, []byte{}, nil}}},
		{"headers", []rec{{7, 5, []byte("k"), []byte("v"), hdrs}, {8, 5, nil, nil, hdrs[:1]}}},
		{"large value", []rec{{65535, -1, []byte("big"), bytes.Repeat([]byte("x"), 3<<20), nil}}},
		{"many", manyRecs(10_000)},
		{"negative deltas", []rec{{0, 100, nil, nil, nil}, {0, 50, nil, nil, nil}, {0, 200, nil, nil, nil}, {0, -1 << 40, nil, nil, nil}}},
		{"extreme timestamps", []rec{{0, math.MaxInt64, nil, nil, nil}, {0, math.MinInt64, nil, nil, nil}, {0, 0, nil, nil, nil}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prefix := []byte("previous batches")
			b := build(bytes.Clone(prefix), 42, 7, tc.recs)
			if !bytes.HasPrefix(b, prefix) {
				t.Fatalf("Finish changed the bytes before the batch")
			}
			b = b[len(prefix):]
			SetBaseOffset(b, 1000)
			h, err := Check(b)
			if err != nil {
				t.Fatal(err)
			}
			if h.Size() != len(b) || int(h.Count) != len(tc.recs) || h.ProducerID != 42 || h.BaseSequence != 7 ||
				h.BaseOffset != 1000 || h.LastOffset() != 1000+int64(len(tc.recs))-1 || BaseOffset(b) != 1000 {
				t.Fatalf("header %+v for %d records of %d bytes", h, len(tc.recs), len(b))
			}
			var it Iter
			if err := it.Reset(b); err != nil {
				t.Fatal(err)
			}
			equalRecs(t, readAll(t, &it), tc.recs)
			if err := it.ResetTrusted(b); err != nil {
				t.Fatal(err)
			}
			equalRecs(t, readAll(t, &it), tc.recs)
		})
	}
}

func TestTimestampsInHeader(t *testing.T) {
	b := build(nil, 0, -1, []rec{{0, 100, nil, nil, nil}, {0, 300, nil, nil, nil}, {0, 50, nil, nil, nil}})
	h, err := Check(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.FirstTimestamp != 100 || h.MaxTimestamp != 300 || h.Codec != CodecNone || h.Magic != Magic {
		t.Fatalf("header %+v", h)
	}
}

// TestLayoutInHeader: the layout a Builder stamps is in the header, covered by the CRC,
// and Reset clears it.
func TestLayoutInHeader(t *testing.T) {
	var bld Builder
	bld.Reset(nil, 7, 0)
	bld.SetLayout(0xbeef)
	bld.Add(3, 1, []byte("k"), []byte("v"))
	b := bld.Finish()
	h, err := Check(b)
	if err != nil || h.Layout != 0xbeef {
		t.Fatalf("layout %#x, err %v", h.Layout, err)
	}
	b[18] ^= 1
	if _, err := Check(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a changed layout passes the CRC: %v", err)
	}
	bld.Reset(b[:0], 7, 1)
	bld.Add(3, 1, nil, nil)
	if h, _ := Check(bld.Finish()); h.Layout != 0 {
		t.Fatalf("Reset kept layout %#x", h.Layout)
	}
}

func TestBackToBack(t *testing.T) {
	b := build(nil, 1, 0, []rec{{0, 1, []byte("a"), nil, nil}})
	b = build(b, 1, 1, []rec{{0, 2, []byte("b"), nil, nil}, {0, 3, []byte("c"), nil, nil}})
	h1, err := Check(b) // ignores the second batch behind the first
	if err != nil {
		t.Fatal(err)
	}
	h2, err := Check(b[h1.Size():])
	if err != nil || h2.Count != 2 || h1.Size()+h2.Size() != len(b) {
		t.Fatalf("second batch: %+v, %v", h2, err)
	}
}

func TestBuilderCounts(t *testing.T) {
	var b Builder
	if b.Len() != 0 || b.Count() != 0 || b.Records() != nil {
		t.Fatal("zero Builder is not empty")
	}
	b.Reset(nil, 0, -1)
	want := b.LenWith(5, []byte("key"), []byte("value"), RecordHeader{[]byte("h"), nil})
	b.Add(0, 5, []byte("key"), []byte("value"), RecordHeader{[]byte("h"), nil})
	if b.Len() != want || b.Count() != 1 || len(b.Records()) != want-HeaderSize {
		t.Fatalf("Len %d (LenWith said %d), Count %d, Records %d", b.Len(), want, b.Count(), len(b.Records()))
	}
	want = b.LenWith(-1<<50, nil, nil)
	b.Add(0, -1<<50, nil, nil)
	if b.Len() != want {
		t.Fatalf("Len %d, LenWith said %d", b.Len(), want)
	}
	if out := b.Finish(); len(out) != want || b.Len() != 0 {
		t.Fatalf("Finish returned %d bytes, want %d", len(out), want)
	}
}

func TestBuilderPanics(t *testing.T) {
	f := func(name string, fn func(*Builder)) {
		t.Helper()
		defer func() {
			if r := recover(); r == nil || !strings.HasPrefix(r.(string), "BUG: ") {
				t.Errorf("%s: recovered %v, want a BUG panic", name, r)
			}
		}()
		var b Builder
		fn(&b)
	}
	f("Add before Reset", func(b *Builder) { b.Add(0, 0, nil, nil) })
	f("Finish before Reset", func(b *Builder) { b.Finish() })
	f("Finish empty", func(b *Builder) { b.Reset(nil, 0, 0); b.Finish() })
	f("Finish twice", func(b *Builder) { b.Reset(nil, 0, 0); b.Add(0, 0, nil, nil); b.Finish(); b.Finish() })
	f("too large", func(b *Builder) { b.Reset(nil, 0, 0); b.Add(0, 0, nil, make([]byte, MaxSize)); b.Finish() })
	f("codec none", func(b *Builder) { b.Reset(nil, 0, 0); b.Add(0, 0, nil, nil); b.FinishCompressed(CodecNone, nil) })
}

// header returns the header of a valid two-record batch, for tests that mutate it.
func validBatch() []byte {
	return build(nil, 9, 3, []rec{{1, 10, []byte("key"), []byte("value"), nil}, {2, 20, nil, []byte("v"), nil}})
}

func TestParseHeaderErrors(t *testing.T) {
	le := binary.LittleEndian
	tests := []struct {
		name   string
		mutate func(b []byte) []byte
		is     error
		pos    int
	}{
		{"short", func(b []byte) []byte { return b[:HeaderSize-1] }, ErrShort, -1},
		{"magic", func(b []byte) []byte { b[16] = 2; return b }, ErrBadMagic, 16},
		{"attribute bits", func(b []byte) []byte { b[17] = 0x08; return b }, ErrCorrupt, 17},
		{"unknown codec", func(b []byte) []byte { b[17] = 5; return b }, ErrUnknownCodec, 17},
		{"length too small", func(b []byte) []byte { le.PutUint32(b[8:], 43); return b }, ErrCorrupt, 8},
		{"length too large", func(b []byte) []byte { le.PutUint32(b[8:], MaxSize-11); return b }, ErrCorrupt, 8},
		{"count zero", func(b []byte) []byte { le.PutUint32(b[20:], 0); return b }, ErrCorrupt, 20},
		{"count too large", func(b []byte) []byte { le.PutUint32(b[20:], 100); return b }, ErrCorrupt, 20},
		{"uncompressed size differs", func(b []byte) []byte { le.PutUint32(b[36:], 10); return b }, ErrCorrupt, 36},
		{"uncompressed size too large", func(b []byte) []byte {
			b[17] = byte(CodecZstd)
			le.PutUint32(b[36:], MaxSize)
			return b
		}, ErrCorrupt, 36},
		{"negative base offset", func(b []byte) []byte { SetBaseOffset(b, -1); return b }, ErrCorrupt, 0},
		{"last offset overflows", func(b []byte) []byte { SetBaseOffset(b, math.MaxInt64); return b }, ErrCorrupt, 0},
		{"max below first", func(b []byte) []byte { le.PutUint64(b[48:], 9); return b }, ErrCorrupt, 48},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseHeader(tc.mutate(validBatch()))
			wantErr(t, err, tc.is, tc.pos)
		})
	}
	if _, err := ParseHeader(func() []byte { b := validBatch(); SetBaseOffset(b, math.MaxInt64-1); return b }()); err != nil {
		t.Fatalf("last offset MaxInt64 refused: %v", err)
	}
}

// wantErr checks that err matches is and, for pos >= 0, is a *CorruptError at pos.
func wantErr(t *testing.T, err, is error, pos int) {
	t.Helper()
	if !errors.Is(err, is) {
		t.Fatalf("got error %v, want %v", err, is)
	}
	if !strings.HasPrefix(err.Error(), "cannot ") {
		t.Errorf("message %q does not start with \"cannot \"", err)
	}
	var ce *CorruptError
	if pos < 0 {
		return
	}
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %T %v, want a *CorruptError", err, err)
	}
	if ce.Pos != pos {
		t.Fatalf("error %v at byte %d, want byte %d", err, ce.Pos, pos)
	}
}

func TestCheckErrors(t *testing.T) {
	b := validBatch()
	_, err := Check(b[:len(b)-1])
	wantErr(t, err, ErrShort, -1)

	b[len(b)-1] ^= 1
	_, err = Check(b)
	wantErr(t, err, ErrCorrupt, 12)

	b = validBatch()
	SetBaseOffset(b, 12345) // not covered by the CRC
	if _, err := Check(append(b, 0xff, 0xff)); err != nil {
		t.Fatalf("Check with a new base offset and bytes behind the batch: %v", err)
	}
}

func TestCodecString(t *testing.T) {
	for c, want := range map[Codec]string{CodecNone: "none", CodecZstd: "zstd", CodecS2: "s2", CodecLZ4: "lz4", 7: "codec(7)"} {
		if c.String() != want {
			t.Errorf("Codec(%d).String() = %q, want %q", c, c.String(), want)
		}
	}
}
