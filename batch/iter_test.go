package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// record prefixes a hand-built record body with its body length.
func record(body ...byte) []byte {
	return append(binary.AppendUvarint(nil, uint64(len(body))), body...)
}

// sealed wraps a hand-built records section in a header with a valid CRC.
func sealed(t *testing.T, count uint32, first, max int64, records []byte) []byte {
	t.Helper()
	b, err := Seal(nil, Header{Count: count, FirstTimestamp: first, MaxTimestamp: max, BaseSequence: -1}, records)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRecordErrors(t *testing.T) {
	long := record(append([]byte{0, 0, 0, 16}, "0123456789abcdef\x00\x00"...)...) // 23 bytes, valid
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	tests := []struct {
		name       string
		count      uint32
		first, max int64
		records    []byte
		pos        int // in the batch
	}{
		{"count above records", 2, 0, 0, long, 56 + 23},
		{"bytes after last record", 1, 0, 0, cat(long, []byte("xyz")), 56 + 23},
		{"body length past section", 1, 0, 0, cat([]byte{30}, long[1:]), 56},
		{"body length too small", 1, 0, 0, []byte{5, 0, 0, 0, 0, 0, 0}, 56},
		{"body length truncated", 1, 0, 0, bytes.Repeat([]byte{0x80}, 7), 56},
		{"body length overflows", 1, 0, 0, cat(bytes.Repeat([]byte{0xff}, 10), []byte{1}), 56},
		{"delta truncated", 1, 0, 0, record(0, 0, 0x80, 0x80, 0x80, 0x80), 59},
		{"key past record", 1, 0, 0, record(0, 0, 0, 10, 'a', 'b', 'c', 0, 0), 60},
		{"key past record, not section", 2, 0, 0, cat(record(0, 0, 0, 5, 'a', 0, 0), record(0, 0, 0, 0, 0, 0)), 60},
		{"value past record", 1, 0, 0, record(0, 0, 0, 0, 9, 'x', 0), 61},
		{"header count too large", 1, 0, 0, record(0, 0, 0, 0, 0, 5), 62},
		{"header key truncated", 1, 0, 0, record(0, 0, 0, 0, 0, 1, 3, 'a'), 62},
		{"header value missing", 1, 0, 0, record(0, 0, 0, 0, 0, 1, 1, 'a'), 62},
		{"bytes left in body", 1, 0, 0, record(0, 0, 0, 0, 0, 0, 0xee), 63},
		{"first delta not zero", 1, 0, 1, record(0, 0, 2, 0, 0, 0), 59},
		{"timestamp above max", 2, 0, 0, cat(record(0, 0, 0, 0, 0, 0), record(0, 0, 10, 0, 0, 0)), 66},
		{"max timestamp not reached", 1, 0, 10, record(0, 0, 0, 0, 0, 0), 48},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := sealed(t, tc.count, tc.first, tc.max, tc.records)
			var it Iter
			if err := it.Reset(b); err != nil {
				t.Fatalf("Reset: %v", err)
			}
			for it.Next() {
			}
			wantErr(t, it.Err(), ErrCorrupt, tc.pos)
			if it.Next() {
				t.Fatal("Next true after an error")
			}
		})
	}
}

func TestIterResetErrors(t *testing.T) {
	var it Iter
	if it.Next() || it.Err() != nil {
		t.Fatal("zero Iter is not empty")
	}
	b := validBatch()
	b[len(b)-1] ^= 1
	wantErr(t, it.Reset(b), ErrCorrupt, 12)
	if it.Next() {
		t.Fatal("Next true after a failed Reset")
	}
	wantErr(t, it.Err(), ErrCorrupt, 12)
	if err := it.ResetTrusted(b); err != nil { // no CRC check: the flipped byte is in a value
		t.Fatal(err)
	}
	wantErr(t, it.ResetTrusted(b[:len(b)-1]), ErrShort, -1)
	wantErr(t, it.ResetTrusted(b[:10]), ErrShort, -1)

	h, _ := ParseHeader(validBatch())
	it.ResetRecords(h, h.Records(validBatch())[1:])
	if it.Next() {
		t.Fatal("Next true for a section of the wrong size")
	}
	wantErr(t, it.Err(), ErrCorrupt, 36)
}

func TestFinishCompressed(t *testing.T) {
	recs := manyRecs(100)
	var b Builder
	b.Reset(nil, 5, 0)
	for _, r := range recs {
		b.Add(r.logical, r.ts, r.key, r.value)
	}
	plain := bytes.Clone(b.Records())
	fake := plain[:len(plain)/3] // stands in for the output of a real codec
	out := b.FinishCompressed(CodecS2, fake)

	h, err := Check(out)
	if err != nil {
		t.Fatal(err)
	}
	if h.Codec != CodecS2 || int(h.UncompressedSize) != len(plain) || !bytes.Equal(h.Records(out), fake) || h.Count != 100 {
		t.Fatalf("header %+v", h)
	}
	var it Iter
	if err := it.Reset(out); !errors.Is(err, ErrCompressed) {
		t.Fatalf("Reset of a compressed batch: %v", err)
	}
	it.ResetRecords(h, plain)
	equalRecs(t, readAll(t, &it), recs)

	b.Reset(nil, 5, 0)
	b.Add(0, 0, []byte("k"), nil)
	out = b.FinishCompressed(CodecZstd, make([]byte, 100)) // larger: stored uncompressed
	if h, err := Check(out); err != nil || h.Codec != CodecNone {
		t.Fatalf("header %+v, err %v", h, err)
	}
}

func TestSeal(t *testing.T) {
	recs := []rec{{1, 10, []byte("key"), []byte("value"), nil}, {2, 20, nil, []byte("v"), nil}}
	want := build([]byte("prefix"), 9, 3, recs)
	h, _ := ParseHeader(want[6:])
	got, err := Seal([]byte("prefix"), Header{Count: 2, ProducerID: 9, BaseSequence: 3, FirstTimestamp: 10, MaxTimestamp: 20},
		h.Records(want[6:]))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Seal: %v\n got %x\nwant %x", err, got, want)
	}
	for _, bad := range []Header{{Count: 0}, {Count: 1, Codec: 4}, {Count: 1, MaxTimestamp: -1}, {Count: 1000}} {
		dst := []byte("prefix")
		out, err := Seal(dst, bad, h.Records(want[6:]))
		if !errors.Is(err, ErrCorrupt) || string(out) != "prefix" {
			t.Errorf("Seal(%+v) = %q, %v; want dst unchanged and a corrupt error", bad, out, err)
		}
	}
	if _, err := Seal(nil, Header{Count: 1}, make([]byte, MaxSize)); err == nil {
		t.Error("Seal accepted a records section over MaxSize")
	}
}

func TestHeaderIter(t *testing.T) {
	var r Record
	hi := r.HeaderIter()
	if _, ok := hi.Next(); ok || hi.Len() != 0 {
		t.Fatal("empty Record has headers")
	}
	r.Headers = []byte{2, 1, 'k', 0, 5, 'x'} // second header truncated
	hi = r.HeaderIter()
	if h, ok := hi.Next(); !ok || string(h.Key) != "k" || h.Value != nil || hi.Len() != 1 {
		t.Fatalf("first header: %q %v", h, ok)
	}
	if _, ok := hi.Next(); ok || hi.Len() != 0 {
		t.Fatal("malformed second header returned")
	}
	r.Headers = []byte{1, 1, 'k', 5, 'x'} // value truncated
	hi = r.HeaderIter()
	if _, ok := hi.Next(); ok {
		t.Fatal("header with a truncated value returned")
	}
}

func TestAllocs(t *testing.T) {
	key, val := []byte("some-key"), bytes.Repeat([]byte("v"), 300)
	buf := make([]byte, 0, 64<<10)
	var b Builder
	n := testing.AllocsPerRun(100, func() {
		b.Reset(buf[:0], 1, 0)
		for i := range 50 {
			b.Add(uint16(i), int64(i), key, val)
			b.Add(uint16(i), int64(i), key, val, RecordHeader{key, val}, RecordHeader{nil, key})
		}
		buf = b.Finish()
	})
	if n != 0 {
		t.Errorf("Builder: %v allocations per batch, want 0", n)
	}
	var it Iter
	n = testing.AllocsPerRun(100, func() {
		if err := it.Reset(buf); err != nil {
			t.Fatal(err)
		}
		for it.Next() {
			hi := it.Record().HeaderIter()
			for _, ok := hi.Next(); ok; _, ok = hi.Next() {
			}
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
	})
	if n != 0 {
		t.Errorf("Iter: %v allocations per batch, want 0", n)
	}
}
