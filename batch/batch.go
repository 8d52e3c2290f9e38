// Package batch encodes and decodes sluice record batches, the unit a producer sends, the
// broker stores and a consumer receives (docs/format.md §1 is the reference; this comment
// is a summary of it).
//
// A batch is a 56-byte header followed by the records section. Integers are
// little-endian:
//
//	 0 +--------------------------+
//	   | base offset        int64 |  first record's offset; set by the broker
//	 8 +--------------------------+
//	   | length            uint32 |  bytes after this field: batch size is 12+length
//	12 +--------------------------+
//	   | crc               uint32 |  CRC32C of bytes [16, 12+length)
//	16 +--------------------------+  <- CRC coverage starts here
//	   | magic              uint8 |  Magic
//	17 +--------------------------+
//	   | attributes         uint8 |  bits 0-2 Codec, bits 3-7 zero
//	18 +--------------------------+
//	   | layout            uint16 |  topic version routed by (low 16 bits); 0 = unsaid
//	20 +--------------------------+
//	   | record count      uint32 |  >= 1; offsets base .. base+count-1
//	24 +--------------------------+
//	   | producer id        int64 |
//	32 +--------------------------+
//	   | base sequence      int32 |
//	36 +--------------------------+
//	   | uncompressed size uint32 |  records section size once decompressed
//	40 +--------------------------+
//	   | first timestamp    int64 |  Unix ms of the first record
//	48 +--------------------------+
//	   | max timestamp      int64 |  largest record timestamp
//	56 +--------------------------+
//	   | records section ...      |  count records, one block if compressed
//	   +--------------------------+  <- 12+length, at most MaxSize
//
// The base offset is outside the CRC so that the broker can assign offsets without
// rewriting anything else: the CRC a producer computes is the one on disk.
//
// The records section is count records back to back, compressed as one block when the
// codec is not CodecNone. Each record is:
//
//	uvarint body length | uint16 logical | varint timestamp delta |
//	uvarint key length | key | uvarint value length | value |
//	uvarint header count | (uvarint key length | key | uvarint value length | value)...
//
// where body length counts the bytes after itself and the delta is taken from the first
// timestamp.
//
// This package does no I/O and no compression: a codec package compresses Builder.Records
// and finishes the batch with Builder.FinishCompressed, or decompresses Header.Records and
// iterates it with Iter.ResetRecords.
//
// Concurrency: none is provided. Functions that only read a batch (ParseHeader, Check,
// BaseOffset, Header methods) may run concurrently on the same bytes as long as nobody
// writes them. A Builder or an Iter is used by one goroutine at a time.
package batch

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"sluice/internal/crc32c"
)

const (
	// HeaderSize is the size of the fixed batch header.
	HeaderSize = 56
	// Magic is the format version this package reads and writes.
	Magic = 1
	// MaxSize is the largest total size of a batch (12 + length), compressed or not, and
	// also of a batch once its records are decompressed.
	MaxSize = 64 << 20
)

// Byte positions of the header fields; CorruptError.Pos uses them for header errors.
const (
	offBaseOffset   = 0
	offLength       = 8
	offCRC          = 12
	offMagic        = 16 // also where the CRC-covered bytes start
	offAttributes   = 17
	offLayout       = 18
	offCount        = 20
	offProducerID   = 24
	offBaseSequence = 32
	offUncompressed = 36
	offFirstTS      = 40
	offMaxTS        = 48

	// minRecordSize is the smallest encoded record: body length, logical id (2), delta,
	// key length, value length and header count, all zero-valued.
	minRecordSize = 7
	// maxSection is the largest size of a records section, decompressed or not.
	maxSection = MaxSize - HeaderSize
)

// Codec names the compression of a batch's records section.
type Codec uint8

// The codecs. Values 4-7 fit the attribute bits but name nothing and are refused.
const (
	CodecNone Codec = 0
	CodecZstd Codec = 1
	CodecS2   Codec = 2
	CodecLZ4  Codec = 3
)

// String returns the codec's lower-case name, or "codec(N)" for an unknown value.
func (c Codec) String() string {
	switch c {
	case CodecNone:
		return "none"
	case CodecZstd:
		return "zstd"
	case CodecS2:
		return "s2"
	case CodecLZ4:
		return "lz4"
	}
	return "codec(" + strconv.Itoa(int(c)) + ")"
}

// Header is the decoded fixed header of a batch.
type Header struct {
	BaseOffset       int64
	Length           uint32 // bytes after the length field; see Size
	CRC              uint32
	Magic            uint8
	Codec            Codec
	Count            uint32
	ProducerID       int64
	BaseSequence     int32
	UncompressedSize uint32
	FirstTimestamp   int64
	MaxTimestamp     int64
	// Layout is the topic version (its low 16 bits) whose partition layout the producer
	// routed the batch's records by, 0 when the producer did not say (docs/format.md §1).
	// A consumer that meets a layout it does not know learns the topic's new layout before
	// it delivers the batch (a topic expansion, docs/cluster.md).
	Layout uint16
}

// Size returns the total size of the batch in bytes, 12 + Length.
func (h *Header) Size() int { return 12 + int(h.Length) }

// LastOffset returns the offset of the batch's last record, BaseOffset + Count - 1.
func (h *Header) LastOffset() int64 { return h.BaseOffset + int64(h.Count) - 1 }

// Records returns the records section of b, the batch h was parsed from; it is compressed
// unless h.Codec is CodecNone. b must hold the whole batch (len(b) >= h.Size()).
func (h *Header) Records(b []byte) []byte { return b[HeaderSize:h.Size():h.Size()] }

// ParseHeader decodes and validates the header at the front of b. It needs only
// HeaderSize bytes (ErrShort if b is shorter) and checks every header rule of the format:
// magic, codec, reserved attribute bits, length and uncompressed size bounds, count,
// offsets and timestamps. It does not check the CRC, which needs the whole batch: Check does.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, ErrShort
	}
	le := binary.LittleEndian
	attr := b[offAttributes]
	h := Header{
		BaseOffset:       int64(le.Uint64(b[offBaseOffset:])),
		Length:           le.Uint32(b[offLength:]),
		CRC:              le.Uint32(b[offCRC:]),
		Magic:            b[offMagic],
		Codec:            Codec(attr & 7),
		Count:            le.Uint32(b[offCount:]),
		ProducerID:       int64(le.Uint64(b[offProducerID:])),
		BaseSequence:     int32(le.Uint32(b[offBaseSequence:])),
		UncompressedSize: le.Uint32(b[offUncompressed:]),
		FirstTimestamp:   int64(le.Uint64(b[offFirstTS:])),
		MaxTimestamp:     int64(le.Uint64(b[offMaxTS:])),
		Layout:           le.Uint16(b[offLayout:]),
	}
	if h.Magic != Magic {
		return Header{}, badMagic(h.Magic) // nothing else is meaningful in another version
	}
	if attr>>3 != 0 {
		return Header{}, corrupt(offAttributes, "attribute bits 3-7 are "+utoa(uint64(attr>>3))+", want 0")
	}
	if err := h.validate(); err != nil {
		return Header{}, err
	}
	return h, nil
}

// validate checks the header rules that the decoded fields can express, except the magic:
// ParseHeader checks the magic and the reserved attribute bits first, and Seal sets the magic
// before running it on the header it is about to write.
func (h *Header) validate() error {
	if h.Codec > CodecLZ4 {
		return &CorruptError{Pos: offAttributes, Reason: "codec " + utoa(uint64(h.Codec)), Err: ErrUnknownCodec}
	}
	if h.Length < HeaderSize-12 || h.Length > MaxSize-12 {
		return corrupt(offLength, "length "+utoa(uint64(h.Length))+" outside [44, MaxSize-12]")
	}
	if err := h.validateRecords(); err != nil {
		return err
	}
	if h.BaseOffset < 0 || h.BaseOffset > math.MaxInt64-int64(h.Count)+1 {
		return corrupt(offBaseOffset, "base offset "+itoa(h.BaseOffset)+" with count "+utoa(uint64(h.Count))+" is out of range")
	}
	if h.MaxTimestamp < h.FirstTimestamp {
		return corrupt(offMaxTS, "max timestamp "+itoa(h.MaxTimestamp)+" below first timestamp "+itoa(h.FirstTimestamp))
	}
	return nil
}

// validateRecords checks count and uncompressed size against each other and the length.
func (h *Header) validateRecords() error {
	u := uint64(h.UncompressedSize)
	if h.Codec == CodecNone && u != uint64(h.Length)-(HeaderSize-12) {
		return corrupt(offUncompressed, "uncompressed size "+utoa(u)+" differs from stored size "+utoa(uint64(h.Length)-(HeaderSize-12)))
	}
	if u > maxSection {
		return corrupt(offUncompressed, "uncompressed size "+utoa(u)+" exceeds MaxSize-HeaderSize")
	}
	if h.Count == 0 {
		return corrupt(offCount, "record count 0")
	}
	if uint64(h.Count)*minRecordSize > u {
		return corrupt(offCount, "record count "+utoa(uint64(h.Count))+" cannot fit "+utoa(u)+" bytes of records")
	}
	return nil
}

func badMagic(m uint8) error {
	return &CorruptError{Pos: offMagic, Reason: "magic " + utoa(uint64(m)) + ", want 1", Err: ErrBadMagic}
}

// Check verifies that b holds one whole batch starting at b[0] and that its CRC matches,
// and returns its header. Bytes after the batch (b[h.Size():], the next batch) are ignored.
// It returns ErrShort if b ends before the batch does.
func Check(b []byte) (Header, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return Header{}, err
	}
	if len(b) < h.Size() {
		return Header{}, ErrShort
	}
	if got := crc32c.Checksum(b[offMagic:h.Size()]); got != h.CRC {
		return Header{}, corrupt(offCRC, "crc is "+strconv.FormatUint(uint64(h.CRC), 16)+
			", computed "+strconv.FormatUint(uint64(got), 16))
	}
	return h, nil
}

// SetBaseOffset writes off into the base offset field of the batch at b[0]. The field is
// not covered by the CRC, so the batch stays valid.
func SetBaseOffset(b []byte, off int64) {
	binary.LittleEndian.PutUint64(b[offBaseOffset:], uint64(off))
}

// BaseOffset reads the base offset of the batch at b[0] without parsing or validating
// the rest of the header.
func BaseOffset(b []byte) int64 {
	return int64(binary.LittleEndian.Uint64(b[offBaseOffset:]))
}

// Seal appends a batch made of h and records to dst and returns the extended buffer.
// It sets h.Magic, h.Length and h.CRC (and h.UncompressedSize for CodecNone); the other
// fields are written as given. h.BaseOffset is normally 0 (the broker sets it).
//
// Seal is for a codec package that re-encodes the records of an existing batch. It
// validates the result like ParseHeader and returns dst unchanged with an error if the
// header would be refused (too large, count 0, and so on), since those inputs may come
// from a client.
func Seal(dst []byte, h Header, records []byte) ([]byte, error) {
	if len(records) > maxSection {
		return dst, fmt.Errorf("cannot seal batch: records section of %d bytes exceeds MaxSize-HeaderSize", len(records))
	}
	h.Magic = Magic
	h.Length = uint32(HeaderSize - 12 + len(records))
	if h.Codec == CodecNone {
		h.UncompressedSize = uint32(len(records))
	}
	if err := h.validate(); err != nil {
		return dst, fmt.Errorf("cannot seal batch: %w", err)
	}
	start := len(dst)
	dst = append(dst, make([]byte, HeaderSize)...) // compiled to a grow and clear, no allocation of its own
	dst = append(dst, records...)
	putHeader(dst[start:], &h)
	return dst, nil
}

// putHeader writes h into b[:HeaderSize], then computes the CRC over b[16:h.Size()], which
// must already hold the records, and stores it in b and h.CRC.
func putHeader(b []byte, h *Header) {
	le := binary.LittleEndian
	le.PutUint64(b[offBaseOffset:], uint64(h.BaseOffset))
	le.PutUint32(b[offLength:], h.Length)
	b[offMagic] = h.Magic
	b[offAttributes] = byte(h.Codec)
	le.PutUint16(b[offLayout:], h.Layout)
	le.PutUint32(b[offCount:], h.Count)
	le.PutUint64(b[offProducerID:], uint64(h.ProducerID))
	le.PutUint32(b[offBaseSequence:], uint32(h.BaseSequence))
	le.PutUint32(b[offUncompressed:], h.UncompressedSize)
	le.PutUint64(b[offFirstTS:], uint64(h.FirstTimestamp))
	le.PutUint64(b[offMaxTS:], uint64(h.MaxTimestamp))
	h.CRC = crc32c.Checksum(b[offMagic:h.Size()])
	le.PutUint32(b[offCRC:], h.CRC)
}

// NewerLayout reports whether a batch's layout stamp s (0: none) names a topic version
// newer than the one whose low 16 bits are v, in serial number arithmetic on 16 bits.
// A consumer that meets such a batch learns that its view of the layouts is behind; a
// broker refuses one produced at version v, whose records were routed by a layout it
// does not serve.
func NewerLayout(s, v uint16) bool { return s != 0 && int16(s-v) > 0 }
