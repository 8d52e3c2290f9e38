package codec

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"sluice/batch"
)

var compressed = []batch.Codec{batch.CodecZstd, batch.CodecS2, batch.CodecLZ4}

// compressedBatch returns a batch of 1 KiB JSON records stored with codec, and its header.
func compressedBatch(t testing.TB, codec batch.Codec) ([]byte, batch.Header) {
	t.Helper()
	b := build(new(Compressor), codec, jsonRecords(10, 60, 1<<10))
	h, err := batch.Check(b)
	if err != nil || h.Codec != codec {
		t.Fatalf("building a %v batch: codec %v, %v", codec, h.Codec, err)
	}
	return b, h
}

// reseal returns a batch with header h (CRC recomputed) and records as its section, so
// that only the codec can tell what is wrong with it.
func reseal(t testing.TB, h batch.Header, records []byte) []byte {
	t.Helper()
	b, err := batch.Seal(nil, h, records)
	if err != nil {
		t.Fatalf("cannot reseal: %v", err)
	}
	return b
}

// requireCorrupt fails unless err is a *CorruptError that matches batch.ErrCorrupt.
func requireCorrupt(t testing.TB, err error) {
	t.Helper()
	var ce *CorruptError
	if !errors.As(err, &ce) || !errors.Is(err, batch.ErrCorrupt) ||
		!strings.HasPrefix(err.Error(), "cannot decompress batch: ") {
		t.Fatalf("error %v (%T), want a *CorruptError", err, err)
	}
}

// TestCorrupt damages the compressed section of valid batches under a valid CRC: each
// codec must refuse it with a *CorruptError.
func TestCorrupt(t *testing.T) {
	damage := map[string]func([]byte) []byte{
		"truncated": func(s []byte) []byte { return s[:len(s)/2] },
		"last byte": func(s []byte) []byte { return s[:len(s)-1] },
		"ones":      func(s []byte) []byte { return bytes.Repeat([]byte{0xff}, len(s)) },
		"zeros":     func(s []byte) []byte { return make([]byte, len(s)) },
		"empty":     func(s []byte) []byte { return nil },
		"appended":  func(s []byte) []byte { return append(bytes.Clone(s), "trailing junk bytes"...) },
	}
	for _, codec := range compressed {
		b, h := compressedBatch(t, codec)
		for name, f := range damage {
			t.Run(codec.String()+"/"+name, func(t *testing.T) {
				bad := reseal(t, h, f(bytes.Clone(h.Records(b))))
				var d Decompressor
				var it batch.Iter
				requireCorrupt(t, d.Iter(&it, bad))
				if it.Next() || it.Err() != nil {
					t.Fatal("iterator not left empty after an error")
				}
			})
		}
	}
}

// TestCorruptRandom flips random bytes of compressed sections under a valid CRC: whatever
// the codec makes of it, nothing panics and every error is typed.
func TestCorruptRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	var d Decompressor
	for _, codec := range compressed {
		b, h := compressedBatch(t, codec)
		for range 300 {
			sec := bytes.Clone(h.Records(b))
			for range 1 + r.IntN(3) {
				sec[r.IntN(len(sec))] ^= byte(1 + r.IntN(255))
			}
			var it batch.Iter
			if err := d.Iter(&it, reseal(t, h, sec)); err != nil {
				requireCorrupt(t, err)
				continue
			}
			for it.Next() {
			}
			if err := it.Err(); err != nil && !errors.Is(err, batch.ErrCorrupt) {
				t.Fatalf("%v: iterating: untyped error %v", codec, err)
			}
		}
	}
}

// TestSizeLies gives valid sections under headers whose uncompressed size is wrong.
func TestSizeLies(t *testing.T) {
	for _, codec := range compressed {
		b, h := compressedBatch(t, codec)
		u := h.UncompressedSize
		for _, lie := range []uint32{u + 1, u - 1, u * 2, 7 * h.Count, maxSection} {
			hl := h
			hl.UncompressedSize = lie
			var d Decompressor
			_, err := d.Records(hl, reseal(t, hl, h.Records(b)))
			requireCorrupt(t, err)
			// s2 stores its size, a zstd frame its size too (more frames may follow one
			// that decodes to less), and lz4 has a bound on its expansion: none allocates
			// for a lie it can see.
			early := codec == batch.CodecS2 || codec == batch.CodecZstd && lie < u ||
				codec == batch.CodecLZ4 && uint64(lie) > lz4MaxRatio*uint64(len(h.Records(b)))
			if early && cap(d.buf) != 0 {
				t.Fatalf("%v: size %d (true %d): allocated %d bytes", codec, lie, u, cap(d.buf))
			}
		}
	}
}

// TestJunkClaimingMuchAllocatesNothing: a section of a few bytes that is no compressed
// block at all, under a header claiming the largest section, is refused before its
// buffer is allocated, by every codec (a broker checks the records of what it is sent).
func TestJunkClaimingMuchAllocatesNothing(t *testing.T) {
	for _, codec := range compressed {
		h := batch.Header{Codec: codec, Count: 2, UncompressedSize: maxSection, FirstTimestamp: 1, MaxTimestamp: 1,
			BaseSequence: -1, ProducerID: -1}
		b := reseal(t, h, []byte("junk, not a block"))
		h, err := batch.Check(b)
		if err != nil {
			t.Fatal(err)
		}
		var d Decompressor
		_, err = d.Records(h, b)
		requireCorrupt(t, err)
		if cap(d.buf) != 0 {
			t.Fatalf("%v: junk claiming %d bytes allocated %d", codec, maxSection, cap(d.buf))
		}
	}
}

// TestHandMadeHeader passes headers that batch.ParseHeader would refuse: Records must
// refuse them too, without allocating or panicking.
func TestHandMadeHeader(t *testing.T) {
	b, h := compressedBatch(t, batch.CodecZstd)
	f := func(name string, edit func(*batch.Header), want error) {
		t.Helper()
		hh := h
		edit(&hh)
		var d Decompressor
		_, err := d.Records(hh, b)
		if want != nil && !errors.Is(err, want) || want == nil && err == nil {
			t.Fatalf("%s: error %v, want %v", name, err, want)
		}
		if cap(d.buf) != 0 {
			t.Fatalf("%s: allocated %d bytes", name, cap(d.buf))
		}
	}
	f("too big", func(h *batch.Header) { h.UncompressedSize = batch.MaxSize }, batch.ErrCorrupt)
	f("max uint32", func(h *batch.Header) { h.UncompressedSize = 1<<32 - 1 }, batch.ErrCorrupt)
	f("unknown codec", func(h *batch.Header) { h.Codec = 6 }, batch.ErrUnknownCodec)
	f("length", func(h *batch.Header) { h.Length = 3 }, batch.ErrCorrupt)
	f("beyond b", func(h *batch.Header) { h.Length += 1 }, batch.ErrShort)
	f("none lies", func(h *batch.Header) { h.Codec = batch.CodecNone }, batch.ErrCorrupt)
}

func TestShort(t *testing.T) {
	for _, codec := range codecs {
		b := build(new(Compressor), codec, jsonRecords(13, 10, 500))
		h, err := batch.Check(b)
		if err != nil {
			t.Fatal(err)
		}
		var d Decompressor
		if _, err := d.Records(h, b[:len(b)-1]); !errors.Is(err, batch.ErrShort) {
			t.Fatalf("%v: Records on a short buffer: %v, want ErrShort", codec, err)
		}
		var it batch.Iter
		if err := d.Iter(&it, b[:len(b)-1]); !errors.Is(err, batch.ErrShort) {
			t.Fatalf("%v: Iter on a short buffer: %v, want ErrShort", codec, err)
		}
	}
}

// TestIterBadCRC checks that Iter checks the CRC before decompressing.
func TestIterBadCRC(t *testing.T) {
	b, _ := compressedBatch(t, batch.CodecS2)
	b[len(b)-1] ^= 1
	var d Decompressor
	var it batch.Iter
	err := d.Iter(&it, b)
	var ce *batch.CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v, want a batch CRC error", err)
	}
}

// TestAllocs checks that a reused Compressor and Decompressor allocate nothing per batch.
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items, so the codecs allocate")
	}
	recs := jsonRecords(14, 60, 1<<10)
	for _, codec := range codecs {
		var c Compressor
		var d Decompressor
		var bld batch.Builder
		var it batch.Iter
		buf := build(&c, codec, recs)
		allocs := testing.AllocsPerRun(50, func() {
			bld.Reset(buf[:0], 7, 3)
			for _, r := range recs {
				bld.Add(r.logical, r.ts, r.key, r.value)
			}
			buf = c.Finish(&bld, codec)
		})
		if allocs != 0 {
			t.Errorf("%v: building and compressing a batch allocates %v times", codec, allocs)
		}
		allocs = testing.AllocsPerRun(50, func() {
			if err := d.Iter(&it, buf); err != nil {
				t.Fatal(err)
			}
			for it.Next() {
			}
		})
		if allocs != 0 {
			t.Errorf("%v: decompressing and iterating a batch allocates %v times", codec, allocs)
		}
	}
}

// TestForeignEncodings decompresses sections made by other encoders of the same formats:
// several zstd frames with checksums, a Snappy block, an S2 "best" block, an LZ4 HC block.
func TestForeignEncodings(t *testing.T) {
	recs := jsonRecords(15, 30, 700)
	plain := build(new(Compressor), batch.CodecNone, recs)
	h, err := batch.Check(plain)
	if err != nil {
		t.Fatal(err)
	}
	src := h.Records(plain)
	zenc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true), zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		t.Fatal(err)
	}
	half := len(src) / 2
	hc := func() []byte {
		dst := make([]byte, lz4.CompressBlockBound(len(src)))
		var c lz4.CompressorHC
		n, err := c.CompressBlock(src, dst)
		if err != nil {
			t.Fatal(err)
		}
		return dst[:n]
	}
	for _, tc := range []struct {
		name    string
		codec   batch.Codec
		section []byte
	}{
		{"zstd frames", batch.CodecZstd, zenc.EncodeAll(src[half:], zenc.EncodeAll(src[:half], nil))},
		{"snappy", batch.CodecS2, snappy.Encode(nil, src)},
		{"s2 best", batch.CodecS2, s2.EncodeBest(nil, src)},
		{"lz4 hc", batch.CodecLZ4, hc()},
	} {
		hh := h
		hh.Codec = tc.codec
		var d Decompressor
		var it batch.Iter
		if err := d.Iter(&it, reseal(t, hh, tc.section)); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		equalRecs(t, readAll(t, &it), recs)
	}
}

// TestZstdChecksum checks that a zstd frame's checksum, when a foreign encoder wrote one,
// is verified.
func TestZstdChecksum(t *testing.T) {
	_, h := compressedBatch(t, batch.CodecZstd)
	plain := build(new(Compressor), batch.CodecNone, jsonRecords(10, 60, 1<<10))
	zenc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true))
	if err != nil {
		t.Fatal(err)
	}
	sec := zenc.EncodeAll(plain[batch.HeaderSize:], nil)
	sec[len(sec)-1] ^= 1
	var d Decompressor
	_, err = d.Records(h, reseal(t, h, sec))
	requireCorrupt(t, err)
}
