package batch

import (
	"encoding/binary"
	"math/bits"
)

// RecordHeader is one key/value header of a record.
type RecordHeader struct {
	Key, Value []byte
}

// Builder appends a batch to a caller's buffer, one record at a time:
//
//	b.Reset(buf, producerID, seq)
//	for ... { b.Add(logical, ts, key, value) }
//	buf = b.Finish()
//
// The records are encoded straight into the buffer behind a reserved header, which Finish
// fills in, so building copies each key and value once. A Builder reused with the buffer
// that Finish returned (Reset(buf[:0], ...)) allocates nothing once the buffer has grown to
// the batch size. The zero Builder is ready for Reset.
type Builder struct {
	dst        []byte
	start      int // position of the batch's first byte in dst
	count      uint32
	first, max int64
	producerID int64
	baseSeq    int32
	layout     uint16
	active     bool // between Reset and Finish
}

// Reset starts a new batch at the end of dst (the bytes already in dst are kept) for the
// given producer id and base sequence (0 and -1 when idempotence is not used). The Builder
// owns dst until Finish returns it.
func (b *Builder) Reset(dst []byte, producerID int64, baseSequence int32) {
	*b = Builder{
		dst:        append(dst, make([]byte, HeaderSize)...), // a grow and a clear, no allocation of its own
		start:      len(dst),
		producerID: producerID,
		baseSeq:    baseSequence,
		active:     true,
	}
}

// SetLayout stamps the batch being built with the topic version its records were routed
// by (Header.Layout; Reset clears it).
func (b *Builder) SetLayout(v uint16) { b.layout = v }

// Add appends a record. timestamp is in Unix milliseconds and may be below earlier ones.
// headers is usually empty; passing none does not allocate, and since Add keeps no
// reference to the headers slice, a header list written at the call site stays on the
// caller's stack. The caller keeps Len() <= MaxSize (see LenWith); Finish panics otherwise.
func (b *Builder) Add(logical uint16, timestamp int64, key, value []byte, headers ...RecordHeader) {
	if !b.active {
		panic("BUG: batch: Builder.Add called before Reset or after Finish")
	}
	if b.count == 0 {
		b.first, b.max = timestamp, timestamp
	}
	b.max = max(b.max, timestamp)
	delta := timestamp - b.first // wraps around for extreme pairs; decoding wraps back
	body := bodyLen(delta, key, value, headers)
	// Grow once for the whole record so that the appends below never reallocate: with a
	// reused buffer this is a capacity check, and the appends are plain stores.
	need := uvarintLen(uint64(body)) + body
	if cap(b.dst)-len(b.dst) < need {
		b.grow(need)
	}
	d := b.dst
	d = binary.AppendUvarint(d, uint64(body))
	d = binary.LittleEndian.AppendUint16(d, logical)
	d = binary.AppendVarint(d, delta)
	d = appendField(d, key)
	d = appendField(d, value)
	d = binary.AppendUvarint(d, uint64(len(headers)))
	for _, h := range headers {
		d = appendField(d, h.Key)
		d = appendField(d, h.Value)
	}
	b.dst = d
	b.count++
}

// grow reallocates the buffer with room for need more bytes and at least twice its
// capacity. Doubling bounds the bytes a batch that outgrows its buffer is copied to its
// final size, in all. append grows a large slice by a quarter at a time, so a 1 MiB batch
// begun in a 64 KiB buffer was copied about five times over (the producer's profile at
// 300 000 records/s into one partition: 6 % of the process's CPU in these copies).
//
// The capacity is exactly that: slices.Grow asked for twice the capacity goes on growing
// by quarters past it, to 2.5-3 times (found by review), and a buffer that much larger
// than its batch would go back to the producer's pool in a class it overfills.
func (b *Builder) grow(need int) {
	d := make([]byte, len(b.dst), max(2*cap(b.dst), len(b.dst)+need))
	copy(d, b.dst)
	b.dst = d
}

// LenWith returns what Len would be after Add with these arguments, so that a caller can
// start a new batch instead of passing MaxSize.
func (b *Builder) LenWith(timestamp int64, key, value []byte, headers ...RecordHeader) int {
	delta := int64(0)
	if b.count > 0 {
		delta = timestamp - b.first
	}
	body := bodyLen(delta, key, value, headers)
	return b.Len() + uvarintLen(uint64(body)) + body
}

// Count returns the number of records added since Reset.
func (b *Builder) Count() int { return int(b.count) }

// Len returns the size in bytes of the batch so far, header included (0 when no batch is
// being built).
func (b *Builder) Len() int {
	if !b.active {
		return 0
	}
	return len(b.dst) - b.start
}

// Records returns the uncompressed records section built so far. It aliases the
// Builder's buffer: it is valid until the next Add, Reset or Finish, and must not be
// modified.
func (b *Builder) Records() []byte {
	if !b.active {
		return nil
	}
	return b.dst[b.start+HeaderSize : len(b.dst) : len(b.dst)]
}

// Finish writes the header (codec none, count, timestamps, sizes, CRC) and returns dst
// with the batch appended. It panics if no record was added or the batch exceeds MaxSize:
// both are bugs in the caller, which must check LenWith before Add.
func (b *Builder) Finish() []byte {
	return b.finish(CodecNone, len(b.Records()))
}

// FinishCompressed finishes the batch with compressed, the records section returned by
// Records compressed with codec, in place of the uncompressed section, and returns dst
// with the batch appended. A codec compresses Records into a scratch buffer of its own
// and passes it here, where it is copied over the uncompressed section: that copy is the
// only cost compression adds to Finish.
//
// If compressed is not smaller than the records section, the batch is finished
// uncompressed, as by Finish: compression never makes a batch larger. Panics as Finish
// does, and for codec CodecNone or an unknown codec.
func (b *Builder) FinishCompressed(codec Codec, compressed []byte) []byte {
	if codec == CodecNone || codec > CodecLZ4 {
		panic("BUG: batch: FinishCompressed with codec " + codec.String())
	}
	n := len(b.Records())
	if len(compressed) >= n {
		return b.Finish()
	}
	b.checkFinish()
	b.dst = append(b.dst[:b.start+HeaderSize], compressed...)
	return b.finish(codec, n)
}

// checkFinish panics if the batch cannot be finished; see Finish.
func (b *Builder) checkFinish() {
	switch {
	case !b.active:
		panic("BUG: batch: Builder.Finish called before Reset or twice")
	case b.count == 0:
		panic("BUG: batch: Builder.Finish with no records")
	case b.Len() > MaxSize:
		panic("BUG: batch: batch of " + itoa(int64(b.Len())) + " bytes exceeds MaxSize")
	}
}

// finish writes the header over the reserved bytes, computes the CRC and hands the
// buffer back, dropping the Builder's reference to it.
func (b *Builder) finish(codec Codec, uncompressed int) []byte {
	b.checkFinish()
	h := Header{
		Length:           uint32(b.Len() - 12),
		Magic:            Magic,
		Codec:            codec,
		Count:            b.count,
		ProducerID:       b.producerID,
		BaseSequence:     b.baseSeq,
		UncompressedSize: uint32(uncompressed),
		FirstTimestamp:   b.first,
		MaxTimestamp:     b.max,
		Layout:           b.layout,
	}
	putHeader(b.dst[b.start:], &h)
	dst := b.dst
	*b = Builder{}
	return dst
}

// bodyLen returns the encoded size of a record after its body length.
func bodyLen(delta int64, key, value []byte, headers []RecordHeader) int {
	n := 2 + uvarintLen(zigzag(delta)) + fieldLen(key) + fieldLen(value) + uvarintLen(uint64(len(headers)))
	for _, h := range headers {
		n += fieldLen(h.Key) + fieldLen(h.Value)
	}
	return n
}

// appendField appends a uvarint length and the bytes.
func appendField(dst, f []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(f))), f...)
}

func fieldLen(f []byte) int { return uvarintLen(uint64(len(f))) + len(f) }

// uvarintLen returns the size of v as a uvarint: one byte per started 7 bits.
func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// zigzag maps a signed value to the unsigned value binary.AppendVarint encodes.
func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }
