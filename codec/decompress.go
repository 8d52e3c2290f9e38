package codec

import (
	"errors"
	"strconv"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"sluice/batch"
)

// maxSection is the largest records section, decompressed or not (format.md §1).
const maxSection = batch.MaxSize - batch.HeaderSize

// lz4MaxRatio bounds how much an LZ4 block expands: a sequence of c bytes (token, offset,
// k length bytes, c = k+3) adds at most 19+255k bytes, fewer than 255c, and literals add
// one byte per byte. A section claiming more is refused before its buffer is allocated.
const lz4MaxRatio = 255

// Decompressor decompresses records sections into a buffer it reuses, so that in steady
// state decompressing a batch allocates nothing. The buffer grows to the largest section
// decompressed so far and is kept. The zero Decompressor is ready to use; it sets up each
// codec the first time a batch needs it.
//
// A Decompressor is used by one goroutine at a time: keep one per consuming goroutine.
type Decompressor struct {
	buf  []byte
	zstd *zstd.Decoder
}

// Records returns the decompressed records section of b, a whole batch whose header h was
// returned by batch.Check (or batch.ParseHeader, for a batch whose CRC is known good).
// For CodecNone it returns the section inside b, without copying. Otherwise the result is
// in the Decompressor's buffer and valid until its next call; it must not be modified.
//
// Records returns batch.ErrShort if b ends before the batch does, and a *CorruptError if
// the section does not decompress to exactly h.UncompressedSize bytes. A size above what
// a batch may hold is refused before anything is allocated for it.
func (d *Decompressor) Records(h batch.Header, b []byte) ([]byte, error) {
	if h.Size() < batch.HeaderSize {
		return nil, corrupt(h.Codec, "has a negative size: header length is "+strconv.FormatUint(uint64(h.Length), 10), nil)
	}
	if len(b) < h.Size() {
		return nil, batch.ErrShort
	}
	src := h.Records(b)
	if h.Codec == batch.CodecNone {
		if uint64(len(src)) != uint64(h.UncompressedSize) { // ParseHeader refuses it; a hand-made h may not
			return nil, sizeMismatch(h.Codec, len(src), int(h.UncompressedSize))
		}
		return src, nil
	}
	if uint64(h.UncompressedSize) > maxSection {
		return nil, corrupt(h.Codec, "claims "+strconv.FormatUint(uint64(h.UncompressedSize), 10)+
			" bytes, above batch.MaxSize-HeaderSize", nil)
	}
	return d.decompress(h.Codec, int(h.UncompressedSize), src)
}

// Iter checks the batch at b[0] (batch.Check: header and CRC), decompresses its records
// and starts it iterating them with it.ResetRecords. Bytes after the batch are ignored.
// It returns the errors of batch.Check and Records; on error it leaves it empty, like the
// zero batch.Iter. The records stay valid until d's next call, as Records says.
func (d *Decompressor) Iter(it *batch.Iter, b []byte) error {
	h, err := batch.Check(b)
	return d.iter(it, h, b, err)
}

// IterVerified is Iter for a batch whose CRC the caller has checked already (batch.Check
// on these same bytes, which it must not have changed since): the header is parsed and
// validated again, the CRC is not computed again. A consumer checks each batch where it
// reads it from the socket, on its fetcher's goroutine, and iterates it on another.
func (d *Decompressor) IterVerified(it *batch.Iter, b []byte) error {
	h, err := batch.ParseHeader(b)
	return d.iter(it, h, b, err)
}

func (d *Decompressor) iter(it *batch.Iter, h batch.Header, b []byte, err error) error {
	var recs []byte
	if err == nil {
		recs, err = d.Records(h, b)
	}
	if err != nil {
		*it = batch.Iter{}
		return err
	}
	it.ResetRecords(h, recs)
	return nil
}

// decompress decodes src, compressed by codec, which must give size bytes, size being at
// most maxSection.
func (d *Decompressor) decompress(codec batch.Codec, size int, src []byte) ([]byte, error) {
	switch codec {
	case batch.CodecZstd:
		return d.decompressZstd(size, src)
	case batch.CodecS2:
		return d.decompressS2(size, src)
	case batch.CodecLZ4:
		return d.decompressLZ4(size, src)
	}
	return nil, corrupt(codec, "has an unknown codec", batch.ErrUnknownCodec)
}

// buffer returns the reused buffer cut to n bytes, growing it first if it is smaller.
func (d *Decompressor) buffer(n int) []byte {
	if cap(d.buf) < n {
		d.buf = make([]byte, n)
	}
	return d.buf[:n:n]
}

func (d *Decompressor) decompressZstd(size int, src []byte) ([]byte, error) {
	// The section's frames are walked first, reading their headers alone (zstdFrame): a
	// section that is not a sequence of frames, or whose frames cannot decode to the
	// batch header's size, is refused before a buffer of that size is allocated for it.
	// Else a hostile batch of a few bytes claiming 64 MiB costs a broker checking its
	// records 64 MiB.
	least, most, err := zstdBounds(src)
	switch {
	case err != nil:
		return nil, corrupt(batch.CodecZstd, "is corrupt", err)
	case least > uint64(size):
		return nil, corrupt(batch.CodecZstd, "decodes to more than the header's "+strconv.Itoa(size)+" bytes", nil)
	case most < uint64(size):
		return nil, corrupt(batch.CodecZstd, "of "+strconv.Itoa(len(src))+" bytes cannot decode to the header's "+
			strconv.Itoa(size)+" bytes", nil)
	}
	if d.zstd == nil {
		d.zstd = newZstdDecoder()
	}
	// The decoder is limited to the capacity of its dst (WithDecodeAllCapLimit), exactly
	// size: it refuses a frame whose content size is larger before decoding it, and stops
	// one without a content size a block past the limit. It checks that limit after each
	// block, and appends a raw or RLE block whole: one that crosses the limit after
	// compressed blocks filled dst grows it first (up to about 1.25 times size of
	// garbage, on a section that is then refused; raw and RLE blocks alone making more
	// than size were refused by the walk). It is given one frame at a time, as zstdFrame
	// cut them (one, from sluice's encoder; foreign encoders write several).
	out := d.buffer(size)[:0]
	for len(src) > 0 {
		frame, rest, _, _, _ := zstdFrame(src) // walked above without error
		src = rest
		if frame == nil { // skippable
			continue
		}
		out, err = d.zstd.DecodeAll(frame, out)
		switch {
		case errors.Is(err, zstd.ErrDecoderSizeExceeded):
			return nil, corrupt(batch.CodecZstd, "decodes to more than the header's "+strconv.Itoa(size)+" bytes", err)
		case err != nil:
			return nil, corrupt(batch.CodecZstd, "is corrupt", err)
		}
	}
	if len(out) != size {
		return nil, sizeMismatch(batch.CodecZstd, len(out), size)
	}
	return out, nil
}

// newZstdDecoder returns a decoder for DecodeAll alone: one internal decoder (the
// Decompressor is not shared), no goroutines, and output limited to its dst's capacity
// (checked after each block: see decompressZstd).
func newZstdDecoder() *zstd.Decoder {
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(maxSection),
		zstd.WithDecodeAllCapLimit(true))
	if err != nil {
		panic("BUG: codec: zstd options refused: " + err.Error())
	}
	return dec
}

func (d *Decompressor) decompressS2(size int, src []byte) ([]byte, error) {
	// The block starts with its decoded size: compare it before allocating, and so that
	// s2.Decode always finds room in the buffer and never allocates one of its own.
	n, err := s2.DecodedLen(src)
	if err != nil {
		return nil, corrupt(batch.CodecS2, "is corrupt", err)
	}
	if n != size {
		return nil, sizeMismatch(batch.CodecS2, n, size)
	}
	out, err := s2.Decode(d.buffer(size), src)
	if err != nil {
		return nil, corrupt(batch.CodecS2, "is corrupt", err)
	}
	return out, nil
}

func (d *Decompressor) decompressLZ4(size int, src []byte) ([]byte, error) {
	if uint64(size) > lz4MaxRatio*uint64(len(src)) {
		return nil, corrupt(batch.CodecLZ4, "of "+strconv.Itoa(len(src))+" bytes cannot decode to the header's "+
			strconv.Itoa(size)+" bytes", nil)
	}
	out := d.buffer(size)
	n, err := lz4.UncompressBlock(src, out)
	if err != nil {
		// The library does not tell a corrupt block from one that decodes past dst.
		return nil, corrupt(batch.CodecLZ4, "is corrupt or decodes to more than the header's "+strconv.Itoa(size)+" bytes", err)
	}
	if n != size {
		return nil, sizeMismatch(batch.CodecLZ4, n, size)
	}
	return out, nil
}
