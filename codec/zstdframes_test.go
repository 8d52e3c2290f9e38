package codec

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/klauspost/compress/zstd"

	"sluice/batch"
)

// zstdSkippable returns a skippable frame carrying payload.
func zstdSkippable(t testing.TB, payload []byte) []byte {
	t.Helper()
	h := zstd.Header{Skippable: true, SkippableID: 3, SkippableSize: uint32(len(payload))}
	b, err := h.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, payload...)
}

// zstdStreamed returns src compressed by the zstd package's streaming writer, flushed
// before its end, so that its frame header gives no content size.
func zstdStreamed(t testing.TB, src []byte, opts ...zstd.EOption) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := zstd.NewWriter(&out, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(src[:len(src)/2]); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(src[len(src)/2:]); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var fh zstd.Header
	if err := fh.Decode(out.Bytes()); err != nil || fh.HasFCS {
		t.Fatalf("streamed frame: header %+v, %v; want one without a content size", fh, err)
	}
	return out.Bytes()
}

// zstdRLE returns a frame without a content size (an 8 MiB window) of RLE blocks that
// decode to sizes.
func zstdRLE(sizes ...int) []byte {
	b := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, (23 - 10) << 3}
	for i, n := range sizes {
		bh := uint32(1<<1) | uint32(n)<<3
		if i == len(sizes)-1 {
			bh |= 1
		}
		b = append(b, byte(bh), byte(bh>>8), byte(bh>>16), 'x')
	}
	return b
}

// zstdNoSize is a frame header without a content size (a 1 KiB window) and one
// compressed block of 5 bytes of junk: its blocks bound it to 128 KiB.
var zstdNoSize = []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x00, 1 | 2<<1 | 5<<3, 0, 0, 'j', 'u', 'n', 'k', '!'}

// TestZstdJunkAllocatesNothing: sections that are zstd frames in part, under a header
// claiming the largest section, are refused before their buffer is allocated. Before the
// frames were walked, each of these cost a checking broker 64 MiB (a second review's
// cases).
func TestZstdJunkAllocatesNothing(t *testing.T) {
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	tiny := enc.EncodeAll([]byte("tiny"), nil)
	// tiny's header gives no content size. Give it one of 2^32-1 bytes (a single-segment
	// descriptor with a 4-byte size and tiny's checksum flag), which its block cannot make.
	var fh zstd.Header
	if err := fh.Decode(tiny); err != nil || fh.HasFCS {
		t.Fatalf("tiny frame: %+v, %v", fh, err)
	}
	huge := append([]byte{0x28, 0xb5, 0x2f, 0xfd, 0xa0 | tiny[4]&0x04, 0xff, 0xff, 0xff, 0xff}, tiny[fh.HeaderSize:]...)
	for name, section := range map[string][]byte{
		"a frame, then junk":             append(bytes.Clone(tiny), "junk after the frame"...),
		"a frame, then 2 bytes":          append(bytes.Clone(tiny), 0, 0),
		"a skippable frame":              zstdSkippable(t, []byte("skip")),
		"a skippable frame, then junk":   append(zstdSkippable(t, nil), "junk"...),
		"no content size, junk blocks":   zstdNoSize,
		"a content size its blocks lack": huge,
		"a cut skippable frame":          zstdSkippable(t, []byte("skip"))[:10],
		"a reserved block":               {0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x00, 1 | 3<<1, 0, 0},
		"a cut block":                    zstdNoSize[:len(zstdNoSize)-1],
		// Block sizes are 21 bits: 33 RLE blocks of 2 MiB would make 64 MiB, but the
		// decoder refuses any above 128 KiB (a review's case).
		"RLE blocks over 128 KiB": zstdRLE(slices.Repeat([]int{1<<21 - 1}, 33)...),
		// RLE blocks of 128 KiB making more than the header says: the decoder would
		// append the last one past its buffer, growing it.
		"RLE blocks past the size": zstdRLE(slices.Repeat([]int{zstdMaxBlock}, maxSection/zstdMaxBlock+1)...),
	} {
		h := batch.Header{Codec: batch.CodecZstd, Count: 2, UncompressedSize: maxSection, FirstTimestamp: 1,
			MaxTimestamp: 1, BaseSequence: -1, ProducerID: -1}
		b := reseal(t, h, section)
		h, err := batch.Check(b)
		if err != nil {
			t.Fatal(err)
		}
		var d Decompressor
		_, err = d.Records(h, b)
		if err == nil {
			t.Fatalf("%s: accepted", name)
		}
		requireCorrupt(t, err)
		if cap(d.buf) != 0 {
			t.Fatalf("%s: claiming %d bytes allocated %d", name, maxSection, cap(d.buf))
		}
	}
}

// TestZstdFrames decodes sections of several frames as foreign encoders write them:
// skippable frames between them, a frame without a content size (a streaming encoder's)
// and with a checksum, a frame of raw blocks (incompressible values) and one of RLE
// blocks (zeros).
func TestZstdFrames(t *testing.T) {
	recs := jsonRecords(16, 40, 700)
	recs = append(recs, rec{logical: 40, ts: 1, value: make([]byte, 300<<10)})
	random := make([]byte, 200<<10)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(random)
	recs = append(recs, rec{logical: 41, ts: 1, value: random})
	plain := build(new(Compressor), batch.CodecNone, recs)
	h, err := batch.Check(plain)
	if err != nil {
		t.Fatal(err)
	}
	src := h.Records(plain)
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	third := len(src) / 3
	var section []byte
	section = append(section, zstdSkippable(t, []byte("an index, say"))...)
	section = enc.EncodeAll(src[:third], section)
	section = append(section, zstdSkippable(t, nil)...)
	section = append(section, zstdStreamed(t, src[third:], zstd.WithEncoderCRC(true))...)
	least, most, err := zstdBounds(section)
	// least: the first frame's content size and the streamed frame's raw and RLE blocks.
	if err != nil || least <= uint64(third) || least > uint64(len(src)) || most < uint64(len(src)) {
		t.Fatalf("bounds %d..%d, %v; want more than %d..at least %d", least, most, err, third, len(src))
	}
	hh := h
	hh.Codec = batch.CodecZstd
	var d Decompressor
	var it batch.Iter
	if err := d.Iter(&it, reseal(t, hh, section)); err != nil {
		t.Fatal(err)
	}
	equalRecs(t, readAll(t, &it), recs)
	// Told one byte more or less than the frames hold, it refuses them.
	for _, lie := range []uint32{hh.UncompressedSize - 1, hh.UncompressedSize + 1} {
		hl := hh
		hl.UncompressedSize = lie
		b := reseal(t, hl, section)
		hl, err := batch.Check(b) // the length too, which hh has from plain
		if err != nil {
			t.Fatal(err)
		}
		_, err = new(Decompressor).Records(hl, b)
		requireCorrupt(t, err)
	}
}

// zstdSeeds returns sections of several shapes for FuzzZstdFrames.
func zstdSeeds(t testing.TB) [][]byte {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true))
	if err != nil {
		t.Fatal(err)
	}
	plain := build(new(Compressor), batch.CodecNone, jsonRecords(17, 6, 200))[batch.HeaderSize:]
	one := enc.EncodeAll(plain, nil)
	return [][]byte{
		nil,
		one,
		enc.EncodeAll(make([]byte, 5000), nil),
		append(bytes.Clone(one), zstdSkippable(t, []byte("x"))...),
		append(zstdStreamed(t, plain), one...),
		append(bytes.Clone(one), 0, 0),
		zstdNoSize,
	}
}

// FuzzZstdFrames holds the frame walk to the decoder on arbitrary sections. Whenever the
// zstd package decodes a whole section, the walk must accept it (save 1 to 3 trailing
// bytes, which the package ignores and the walk refuses), its bounds must hold the
// decoded size, and Records must give the same bytes: the walk never refuses what decodes.
// Whatever the section and the header's size, a buffer is allocated only for a size the
// section's blocks can make: at most 43 690 bytes a section byte.
func FuzzZstdFrames(f *testing.F) {
	for _, s := range zstdSeeds(f) {
		f.Add(s, uint32(len(s)))
	}
	ref, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(fuzzMaxSize))
	if err != nil {
		f.Fatal(err)
	}
	var d Decompressor
	f.Fuzz(func(t *testing.T, section []byte, size uint32) {
		want, refErr := ref.DecodeAll(section, nil)
		least, most, err := zstdBounds(section)
		if refErr == nil {
			if err != nil {
				if rest := zstdTrailing(section); !errors.Is(err, io.ErrUnexpectedEOF) || rest < 1 || rest > 3 {
					t.Fatalf("the walk refused a section that decodes (%d bytes): %v (%d bytes after the frames)",
						len(want), err, rest)
				}
				return
			}
			if n := uint64(len(want)); n < least || n > most {
				t.Fatalf("decoded %d bytes, outside the walk's bounds %d..%d", n, least, most)
			}
			got, err := d.decompressZstd(len(want), section)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("Records refused or changed a section that decodes to %d bytes: %v", len(want), err)
			}
		}
		var fresh Decompressor
		_, _ = fresh.decompressZstd(int(size%(fuzzMaxSize+1)), section)
		if c := uint64(cap(fresh.buf)); c > 0 && (err != nil || c > most || c > zstdMaxBlock/3*uint64(len(section))) {
			t.Fatalf("allocated %d bytes for a section of %d whose frames make at most %d (%v)", c, len(section), most, err)
		}
	})
}

// zstdTrailing returns how many bytes of section follow its last whole frame.
func zstdTrailing(section []byte) int {
	for len(section) > 0 {
		_, rest, _, _, err := zstdFrame(section)
		if err != nil {
			return len(section)
		}
		section = rest
	}
	return 0
}
