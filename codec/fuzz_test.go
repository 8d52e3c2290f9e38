package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"sluice/batch"
)

// Byte positions of the header fields the fuzz target patches (format.md §1).
const (
	offLength       = 8
	offCRC          = 12
	offMagic        = 16
	offAttributes   = 17
	offReserved     = 18
	offUncompressed = 36
)

// fuzzMaxSize caps the uncompressed size patchHeader leaves, so that executions stay fast.
const fuzzMaxSize = 1 << 20

// FuzzDecompress feeds arbitrary bytes to Decompressor.Iter and Records, first as they
// are and then with the header patched to agree with the input (length, magic, known
// codec, reserved bytes, a bounded uncompressed size, CRC), so that mutations reach the
// codecs. Nothing may panic, every error must be typed, and a batch that decodes must
// survive being compressed again with its codec.
func FuzzDecompress(f *testing.F) {
	// Reused across inputs, as a producer and a consumer reuse theirs: stale state must not
	// leak from one batch into the next, and executions stay fast.
	var fz fuzzer
	f.Fuzz(func(t *testing.T, data []byte) {
		fz.check(t, data)
		if len(data) >= batch.HeaderSize && len(data) <= batch.MaxSize {
			fz.check(t, patchHeader(bytes.Clone(data)))
		}
	})
}

// fuzzer holds what FuzzDecompress reuses from one input to the next.
type fuzzer struct {
	d, again Decompressor
	c        Compressor
	it       batch.Iter
}

// patchHeader makes b's header agree with b's size, keeping the fuzzer's codec (modulo
// the known ones), uncompressed size (modulo fuzzMaxSize) and the other fields.
func patchHeader(b []byte) []byte {
	le := binary.LittleEndian
	le.PutUint32(b[offLength:], uint32(len(b)-12))
	b[offMagic], b[offAttributes], b[offReserved], b[offReserved+1] = batch.Magic, b[offAttributes]&3, 0, 0
	u := le.Uint32(b[offUncompressed:]) % fuzzMaxSize
	if batch.Codec(b[offAttributes]) == batch.CodecNone {
		u = uint32(len(b) - batch.HeaderSize)
	}
	le.PutUint32(b[offUncompressed:], u)
	le.PutUint32(b[offCRC:], crc32.Checksum(b[offMagic:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func (fz *fuzzer) check(t *testing.T, b []byte) {
	if h, err := batch.ParseHeader(b); err == nil { // Records without the CRC check
		if _, err := fz.d.Records(h, b); err != nil {
			requireTyped(t, err)
		}
	}
	it := &fz.it
	if err := fz.d.Iter(it, b); err != nil {
		requireTyped(t, err)
		return
	}
	h := it.Header()
	var recs []rec
	for it.Next() {
		recs = append(recs, clone(it.Record()))
	}
	if err := it.Err(); err != nil {
		requireTyped(t, err)
		return
	}
	fz.checkRecompress(t, h, recs)
}

// checkRecompress builds recs again with h's codec and reads them back.
func (fz *fuzzer) checkRecompress(t *testing.T, h batch.Header, recs []rec) {
	if len(recs) != int(h.Count) {
		t.Fatalf("decoded %d records, header says %d", len(recs), h.Count)
	}
	b := build(&fz.c, h.Codec, recs)
	if err := fz.again.Iter(&fz.it, b); err != nil {
		t.Fatalf("rebuilt %v batch refused: %v", h.Codec, err)
	}
	equalRecs(t, readAll(t, &fz.it), recs)
}

func requireTyped(t *testing.T, err error) {
	t.Helper()
	var ce *CorruptError
	switch {
	case errors.Is(err, batch.ErrShort):
	case errors.As(err, &ce):
		if !errors.Is(err, batch.ErrCorrupt) {
			t.Fatalf("*CorruptError does not match batch.ErrCorrupt: %v", err)
		}
	case errors.Is(err, batch.ErrCorrupt):
	default:
		t.Fatalf("untyped error %T: %v", err, err)
	}
}

var writeSeeds = flag.Bool("write-seeds", false, "rewrite the fuzz seed corpus in testdata/fuzz")

// TestWriteSeeds rewrites the checked-in seed corpus when run with -write-seeds.
func TestWriteSeeds(t *testing.T) {
	if !*writeSeeds {
		t.Skip("run with -write-seeds to rewrite testdata/fuzz")
	}
	for name, b := range seedBatches(t) {
		writeSeed(t, "FuzzDecompress", name, b)
	}
}

// seedBatches returns small batches for every codec, whole and damaged.
func seedBatches(t *testing.T) map[string][]byte {
	seeds := map[string][]byte{
		"short": []byte("\x00\x00\x00"),
		"tiny":  build(new(Compressor), batch.CodecZstd, []rec{{0, 5, []byte("k"), nil, nil}}),
	}
	recs := append(jsonRecords(20, 4, 120), headerRecords()[:3]...)
	for _, codec := range compressed {
		b := build(new(Compressor), codec, recs)
		h, err := batch.Check(b)
		if err != nil || h.Codec != codec {
			t.Fatalf("%v seed stored as %v: %v", codec, h.Codec, err)
		}
		seeds[codec.String()] = b
		seeds[codec.String()+"-truncated"] = reseal(t, h, h.Records(b)[:len(h.Records(b))-5])
		lie := h
		lie.UncompressedSize++
		seeds[codec.String()+"-size-lie"] = reseal(t, lie, h.Records(b))
	}
	return seeds
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
