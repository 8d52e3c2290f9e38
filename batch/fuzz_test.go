package batch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// FuzzIter feeds arbitrary bytes to the decoders, first as they are and then with the
// length, magic, attributes, uncompressed size and CRC patched to agree
// with the input, so that mutations get past the header and exercise the record decoder.
// Nothing may panic, every error must be typed, and a batch that decodes must survive
// being rebuilt by Builder.
func FuzzIter(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data)
		if len(data) >= HeaderSize && len(data) <= MaxSize {
			checkDecode(t, patchHeader(bytes.Clone(data)))
		}
	})
}

// FuzzParseHeader checks that ParseHeader never panics, returns typed errors, and that
// every header it accepts obeys the format's bounds.
func FuzzParseHeader(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParseHeader(data)
		if err != nil {
			requireTyped(t, err, data)
			return
		}
		switch {
		case h.Size() < HeaderSize || h.Size() > MaxSize, h.Count == 0, h.Magic != Magic,
			h.Codec > CodecLZ4, h.BaseOffset < 0, h.LastOffset() < h.BaseOffset,
			h.MaxTimestamp < h.FirstTimestamp, h.UncompressedSize > MaxSize-HeaderSize,
			h.Codec == CodecNone && int(h.UncompressedSize) != h.Size()-HeaderSize:
			t.Fatalf("ParseHeader accepted %+v", h)
		}
		if BaseOffset(data) != h.BaseOffset {
			t.Fatalf("BaseOffset %d, header says %d", BaseOffset(data), h.BaseOffset)
		}
	})
}

// crcTable is hash/crc32's Castagnoli table: the fuzz targets patch checksums with it,
// not with the package's own crc32c, so that they also check one against the other.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// patchHeader makes b's header agree with b's size and contents, leaving count, offsets and
// timestamps to the fuzzer.
func patchHeader(b []byte) []byte {
	le := binary.LittleEndian
	le.PutUint32(b[offLength:], uint32(len(b)-12))
	b[offMagic], b[offAttributes] = Magic, 0
	le.PutUint32(b[offUncompressed:], uint32(len(b)-HeaderSize))
	le.PutUint32(b[offCRC:], crc32.Checksum(b[offMagic:], crcTable))
	return b
}

func requireTyped(t *testing.T, err error, b []byte) {
	t.Helper()
	var ce *CorruptError
	switch {
	case errors.Is(err, ErrShort), errors.Is(err, ErrCompressed):
	case errors.As(err, &ce) && errors.Is(err, ErrCorrupt):
		if ce.Pos < 0 || ce.Pos > max(len(b), HeaderSize) {
			t.Fatalf("error position out of range: %v", err)
		}
	default:
		t.Fatalf("untyped error %T: %v", err, err)
	}
}

func checkDecode(t *testing.T, b []byte) {
	var it Iter
	if err := it.ResetTrusted(b); err == nil { // must not panic whatever the CRC says
		for it.Next() {
		}
	}
	h, err := Check(b)
	if err != nil {
		requireTyped(t, err, b)
		return
	}
	if err := it.Reset(b); err != nil {
		if h.Codec == CodecNone || !errors.Is(err, ErrCompressed) {
			t.Fatalf("Check accepted the batch but Reset says %v", err)
		}
		return
	}
	var recs []rec
	for it.Next() {
		r := it.Record()
		if r.Timestamp > h.MaxTimestamp || r.Offset != h.BaseOffset+int64(len(recs)) {
			t.Fatalf("record %d: %+v under header %+v", len(recs), r, h)
		}
		recs = append(recs, rec{r.Logical, r.Timestamp, r.Key, r.Value, collectHeaders(r)})
	}
	if err := it.Err(); err != nil {
		requireTyped(t, err, b)
		return
	}
	checkRebuild(t, b, h, recs)
}

func collectHeaders(r *Record) []RecordHeader {
	var out []RecordHeader
	for hi := r.HeaderIter(); ; {
		h, ok := hi.Next()
		if !ok {
			return out
		}
		out = append(out, h)
	}
}

// checkRebuild encodes recs again: the result must decode to the same records and header,
// and be the same bytes unless the input used longer varints than needed.
func checkRebuild(t *testing.T, b []byte, h Header, recs []rec) {
	if len(recs) != int(h.Count) {
		t.Fatalf("decoded %d records, header says %d", len(recs), h.Count)
	}
	size := h.Size()
	var bld Builder
	bld.Reset(nil, h.ProducerID, h.BaseSequence)
	bld.SetLayout(h.Layout) // the producer's stamp, outside the records
	for _, r := range recs {
		bld.Add(r.logical, r.ts, r.key, r.value, r.headers...)
	}
	again := bld.Finish()
	SetBaseOffset(again, h.BaseOffset)
	h2, err := Check(again)
	if err != nil {
		t.Fatalf("rebuilt batch refused: %v", err)
	}
	h.Length, h.CRC, h.UncompressedSize, h2.Length, h2.CRC, h2.UncompressedSize = 0, 0, 0, 0, 0, 0
	if h != h2 {
		t.Fatalf("rebuilt header %+v, want %+v", h2, h)
	}
	if len(again) > size || len(again) == size && !bytes.Equal(again, b[:size]) {
		t.Fatalf("rebuilt batch differs:\n got %x\nwant %x", again, b[:size])
	}
	var it Iter
	if err := it.Reset(again); err != nil {
		t.Fatal(err)
	}
	equalRecs(t, readAll(t, &it), recs)
}

var writeSeeds = flag.Bool("write-seeds", false, "rewrite the fuzz seed corpus in testdata/fuzz")

// TestWriteSeeds rewrites the checked-in seed corpus when run with -write-seeds.
func TestWriteSeeds(t *testing.T) {
	if !*writeSeeds {
		t.Skip("run with -write-seeds to rewrite testdata/fuzz")
	}
	seeds := seedBatches()
	for name, b := range seeds {
		writeSeed(t, "FuzzIter", name, b)
		writeSeed(t, "FuzzParseHeader", name, b[:min(len(b), HeaderSize)])
	}
}

// seedBatches returns small batches covering each feature of the format.
func seedBatches() map[string][]byte {
	hdr := []RecordHeader{{[]byte("trace"), []byte("t1")}, {nil, []byte("v")}}
	compressed := func() []byte {
		var b Builder
		b.Reset(nil, 3, 100)
		b.Add(1, 10, []byte("key"), bytes.Repeat([]byte("a"), 40))
		return b.FinishCompressed(CodecZstd, []byte("not really zstd"))
	}
	withOffset := build(nil, 1, 0, []rec{{0, 5, []byte("k"), []byte("v"), nil}})
	SetBaseOffset(withOffset, 1<<40)
	return map[string][]byte{
		"one":         build(nil, 0, -1, []rec{{0, 1700000000000, []byte("key"), []byte("value"), nil}}),
		"empty":       build(nil, 0, -1, []rec{{0, 0, nil, nil, nil}}),
		"headers":     build(nil, 7, 3, []rec{{9, 1, []byte("k"), []byte("v"), hdr}, {9, 2, nil, nil, hdr[1:]}}),
		"deltas":      build(nil, 0, -1, []rec{{0, 100, nil, []byte("a"), nil}, {1, 40, nil, []byte("b"), nil}, {2, math.MaxInt64, nil, nil, nil}}),
		"many":        build(nil, 0, -1, manyRecs(20)),
		"compressed":  compressed(),
		"base-offset": withOffset,
		"short":       []byte("\x00\x00\x00"),
	}
}

// writeSeed writes b in the corpus file format of `go test -fuzz`.
func writeSeed(t *testing.T, target, name string, b []byte) {
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
