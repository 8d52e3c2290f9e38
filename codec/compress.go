package codec

import (
	"bytes"
	"slices"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"sluice/batch"
	"sluice/internal/invariants"
)

// zstdLevel is the zstd level of every batch: the library's fastest, about zstd's level 1.
// On BenchmarkCompress's JSON-like records it compresses twice as fast as SpeedDefault
// (about level 3, Kafka's default) to the same ratio (0.268 against 0.273); a level worth
// more than that would be a producer option.
const zstdLevel = zstd.SpeedFastest

// Compressor compresses records sections, keeping the codec state and the scratch buffer
// it compresses into from one batch to the next, so that in steady state compressing a
// batch allocates nothing, with every codec (TestAllocs). The zero Compressor is ready to
// use; it sets up each codec the first time it is asked for it.
//
// A Compressor is used by one goroutine at a time: keep one per producing goroutine.
type Compressor struct {
	scratch []byte
	zstd    *zstd.Encoder
	lz4     *lz4.Compressor // a 136 KiB hash table, so allocated on first use
	check   *Decompressor   // verifies every result in invariants builds
}

// Finish finishes the batch b is building with its records section compressed by codec,
// and returns the buffer with the batch appended, as b.Finish does. The section is stored
// uncompressed (and the header says CodecNone) when codec is CodecNone or when compressing
// does not make it smaller. Finish panics as Builder.Finish does, and for an unknown codec:
// codecs from outside the program go through ParseCodec or a header check first.
func (c *Compressor) Finish(b *batch.Builder, codec batch.Codec) []byte {
	if codec == batch.CodecNone {
		return b.Finish()
	}
	c.scratch = c.Compress(c.scratch[:0], codec, b.Records())
	return b.FinishCompressed(codec, c.scratch)
}

// Compress appends records, an uncompressed records section, compressed by codec to dst
// and returns the extended buffer. With CodecNone it appends records as they are. It
// panics for an unknown codec. dst and records must not overlap.
//
// Compress is for re-encoding the records of an existing batch (see batch.Seal); Finish is
// the way to compress a batch being built.
func (c *Compressor) Compress(dst []byte, codec batch.Codec, records []byte) []byte {
	start := len(dst)
	switch codec {
	case batch.CodecNone:
		dst = append(dst, records...)
	case batch.CodecZstd:
		dst = c.compressZstd(dst, records)
	case batch.CodecS2:
		dst = compressS2(dst, records)
	case batch.CodecLZ4:
		dst = c.compressLZ4(dst, records)
	default:
		panic("BUG: codec: Compress with unknown codec " + codec.String())
	}
	if invariants.Enabled {
		c.verify(codec, records, dst[start:])
	}
	return dst
}

func (c *Compressor) compressZstd(dst, src []byte) []byte {
	if c.zstd == nil {
		c.zstd = newZstdEncoder()
	}
	// Growing dst first spares EncodeAll from growing it in steps as it writes.
	dst = slices.Grow(dst, c.zstd.MaxEncodedSize(len(src)))
	return c.zstd.EncodeAll(src, dst)
}

// newZstdEncoder returns an encoder for EncodeAll alone: one internal encoder (the
// Compressor is not shared), no goroutines, no content checksum.
func newZstdEncoder() *zstd.Encoder {
	enc, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(zstdLevel),
		zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderCRC(false))
	if err != nil {
		panic("BUG: codec: zstd options refused: " + err.Error())
	}
	return enc
}

func compressS2(dst, src []byte) []byte {
	n := s2.MaxEncodedLen(len(src))
	if n < 0 {
		panic("BUG: codec: records section too large for s2") // above 4 GiB, batches stop at 64 MiB
	}
	dst = slices.Grow(dst, n)
	// s2.Encode writes into its dst argument when it has room for MaxEncodedLen, which
	// the spare capacity of dst now has: the result is in place, not a new slice.
	out := s2.Encode(dst[len(dst):cap(dst)], src)
	return dst[:len(dst)+len(out)]
}

func (c *Compressor) compressLZ4(dst, src []byte) []byte {
	if c.lz4 == nil {
		c.lz4 = new(lz4.Compressor)
	}
	start := len(dst)
	bound := lz4.CompressBlockBound(len(src))
	dst = slices.Grow(dst, bound)[:start+bound]
	// With room for CompressBlockBound the block always fits, and an incompressible
	// section comes back as literals, slightly larger: Finish then stores it as it is.
	n, err := c.lz4.CompressBlock(src, dst[start:])
	if err != nil || n == 0 {
		panic("BUG: codec: lz4 refused a block with room for its bound")
	}
	return dst[:start+n]
}

// verify decompresses what Compress produced and panics unless it gives back records.
func (c *Compressor) verify(codec batch.Codec, records, compressed []byte) {
	if codec == batch.CodecNone {
		return
	}
	if c.check == nil {
		c.check = new(Decompressor)
	}
	got, err := c.check.decompress(codec, len(records), compressed)
	if err != nil {
		panic("BUG: codec: " + codec.String() + " output does not decompress: " + err.Error())
	}
	if !bytes.Equal(got, records) {
		panic("BUG: codec: " + codec.String() + " output decompresses to different records")
	}
}
