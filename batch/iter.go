package batch

import "encoding/binary"

// Record is one decoded record. Key, Value and Headers are slices of the batch (capacity
// limited to their length), valid as long as the batch bytes are; a zero length decodes as
// nil.
type Record struct {
	Offset    int64 // BaseOffset + index in the batch
	Logical   uint16
	Timestamp int64 // Unix milliseconds
	Key       []byte
	Value     []byte
	// Headers is the raw encoded header list (uvarint count, then the pairs); read it
	// with HeaderIter. Iter has validated it.
	Headers []byte
}

// Iter iterates the records of one batch without allocating:
//
//	if err := it.Reset(b); err != nil { ... }
//	for it.Next() { r := it.Record(); ... }
//	if err := it.Err(); err != nil { ... }
//
// Every record is validated as Next reaches it, so a corrupt record is reported only
// after the records before it have been returned; a caller that must not act on a
// partially valid batch iterates it once to validate it first. The zero Iter is empty.
type Iter struct {
	recs   []byte
	pos    int    // position of the next record in recs
	i      uint32 // records returned so far
	sawMax bool   // some record's timestamp equals h.MaxTimestamp
	h      Header
	rec    Record
	err    error
}

// Reset starts iterating the batch at b[0] after checking its header and CRC (Check).
// It returns ErrCompressed for a compressed batch. The error is also kept for Err.
func (it *Iter) Reset(b []byte) error {
	h, err := Check(b)
	return it.reset(h, b, err)
}

// ResetTrusted is Reset without the CRC check, for batches whose CRC was verified when
// they were stored or recovered. The header is still validated.
func (it *Iter) ResetTrusted(b []byte) error {
	h, err := ParseHeader(b)
	if err == nil && len(b) < h.Size() {
		err = ErrShort
	}
	return it.reset(h, b, err)
}

func (it *Iter) reset(h Header, b []byte, err error) error {
	if err == nil && h.Codec != CodecNone {
		err = ErrCompressed
	}
	if err != nil {
		*it = Iter{err: err}
		return err
	}
	it.ResetRecords(h, h.Records(b))
	return nil
}

// ResetRecords starts iterating records, a records section the caller has decompressed,
// described by h, a header from ParseHeader or Check. A section whose size differs from
// h.UncompressedSize is reported by Err.
func (it *Iter) ResetRecords(h Header, records []byte) {
	*it = Iter{recs: records, h: h}
	if uint64(len(records)) != uint64(h.UncompressedSize) {
		it.err = corrupt(offUncompressed, "records section is "+itoa(int64(len(records)))+
			" bytes, header says "+utoa(uint64(h.UncompressedSize)))
	}
}

// Header returns the header of the batch being iterated.
func (it *Iter) Header() Header { return it.h }

// Next decodes the next record and reports whether there is one. It returns false at the
// end of the batch or on an error, which Err then returns.
func (it *Iter) Next() bool {
	if it.err != nil {
		return false
	}
	if it.i == it.h.Count {
		it.err = it.checkEnd()
		return false
	}
	if err := it.decode(); err != nil {
		it.err = err
		return false
	}
	it.i++
	return true
}

// Record returns the record Next decoded. It points into the Iter and is overwritten by
// the next call to Next: copy it to keep it.
func (it *Iter) Record() *Record { return &it.rec }

// Err returns the error that ended the iteration, or nil if every record was valid. The
// errors are ErrShort, ErrCompressed and *CorruptError; nil until Next returns false.
func (it *Iter) Err() error { return it.err }

// checkEnd validates the end of the section once Count records are decoded.
func (it *Iter) checkEnd() error {
	if it.pos != len(it.recs) {
		return it.corrupt(it.pos, itoa(int64(len(it.recs)-it.pos))+" bytes after the last record")
	}
	if !it.sawMax && it.h.Count > 0 { // Count 0: the zero Iter, or a header ResetRecords got unchecked
		return corrupt(offMaxTS, "no record has the max timestamp "+itoa(it.h.MaxTimestamp))
	}
	return nil
}

// decode decodes the record at it.pos into it.rec. Fields are read from body, the section
// cut at the record's end, so that a length running past the body fails like one running
// past the section. The fast path is the straight line of field reads; every check is a
// compare and a branch that is not taken in valid batches, and errors are built only when
// they are.
func (it *Iter) decode() error {
	if it.pos == len(it.recs) {
		return it.corrupt(it.pos, "records section ends after "+utoa(uint64(it.i))+" of "+utoa(uint64(it.h.Count))+" records")
	}
	n, p := uvarint(it.recs, it.pos)
	if p < 0 || n < minRecordSize-1 || n > uint64(len(it.recs)-p) {
		return it.corrupt(it.pos, "bad record body length")
	}
	end := p + int(n)
	body := it.recs[:end]
	r := &it.rec
	r.Offset = it.h.BaseOffset + int64(it.i)
	r.Logical = binary.LittleEndian.Uint16(body[p:])
	p += 2
	if p = it.timestamp(body, p); p < 0 {
		return it.err
	}
	f := p
	if r.Key, p = field(body, p); p < 0 {
		return it.corrupt(f, "key length runs past the record")
	}
	f = p
	if r.Value, p = field(body, p); p < 0 {
		return it.corrupt(f, "value length runs past the record")
	}
	f = p
	if p = skipHeaders(body, p); p < 0 {
		return it.corrupt(f, "headers run past the record")
	}
	r.Headers = body[f:p:p]
	if p != end {
		return it.corrupt(p, itoa(int64(end-p))+" bytes left in the record body")
	}
	it.pos = end
	return nil
}

// timestamp decodes the timestamp delta at b[p:] into it.rec and checks it against the
// header. It returns the next position, or -1 after setting it.err.
func (it *Iter) timestamp(b []byte, p int) int {
	u, next := uvarint(b, p)
	if next < 0 {
		it.err = it.corrupt(p, "timestamp delta runs past the record")
		return -1
	}
	delta := int64(u>>1) ^ -int64(u&1) // zig-zag
	ts := it.h.FirstTimestamp + delta  // wraps like the encoder's subtraction
	switch {
	case it.i == 0 && delta != 0:
		it.err = it.corrupt(p, "first record has timestamp delta "+itoa(delta)+", want 0")
	case ts > it.h.MaxTimestamp:
		it.err = it.corrupt(p, "timestamp "+itoa(ts)+" above the max timestamp "+itoa(it.h.MaxTimestamp))
	default:
		it.sawMax = it.sawMax || ts == it.h.MaxTimestamp
		it.rec.Timestamp = ts
		return next
	}
	return -1
}

// corrupt reports an error at position p of the records section.
func (it *Iter) corrupt(p int, reason string) error { return corrupt(HeaderSize+p, reason) }

// skipHeaders validates the header list at b[p:] and returns the position after it, or -1.
func skipHeaders(b []byte, p int) int {
	n, p := uvarint(b, p)
	if p < 0 || n > uint64(len(b)-p)/2 { // each header takes at least two bytes
		return -1
	}
	for ; n > 0 && p >= 0; n-- {
		_, p = field(b, p)
		if p >= 0 {
			_, p = field(b, p)
		}
	}
	return p
}

// field decodes a uvarint length and that many bytes at b[p:] and returns them (nil for a
// zero length) and the next position, or -1 if b ends first.
func field(b []byte, p int) ([]byte, int) {
	n, p := uvarint(b, p)
	if p < 0 || n > uint64(len(b)-p) {
		return nil, -1
	}
	if n == 0 {
		return nil, p
	}
	e := p + int(n)
	return b[p:e:e], e
}

// uvarint decodes the uvarint at b[p:] and returns it and the next position, or -1 if b
// ends inside it or it overflows 64 bits. The fast path covers one-byte values, which
// most header counts, short keys and small deltas are; longer ones take uvarintSlow.
func uvarint(b []byte, p int) (uint64, int) {
	if p < len(b) && b[p] < 0x80 {
		return uint64(b[p]), p + 1
	}
	return uvarintSlow(b, p)
}

// uvarintSlow is uvarint past one byte. Two-byte values, which the body and value
// lengths of records from 128 bytes to 16 KiB are (two of them per record of 1 KiB), are
// decoded here without binary.Uvarint's loop: BenchmarkIter/1024B/crc, ten alternating
// runs, benchstat, 4.58 → 3.74 µs a 64 KiB batch (p=0.011), 3.00 → 2.71 without the
// CRC (p=0.105).
func uvarintSlow(b []byte, p int) (uint64, int) {
	if p+1 < len(b) && b[p+1] < 0x80 {
		return uint64(b[p]&0x7f) | uint64(b[p+1])<<7, p + 2
	}
	if p >= len(b) {
		return 0, -1
	}
	v, n := binary.Uvarint(b[p:])
	if n <= 0 {
		return 0, -1
	}
	return v, p + n
}

// HeaderIter iterates the headers of a record. The zero HeaderIter is empty.
type HeaderIter struct {
	b []byte
	p int
	n uint64 // headers left
}

// HeaderIter returns an iterator over r.Headers.
func (r *Record) HeaderIter() HeaderIter {
	n, p := uvarint(r.Headers, 0)
	if p < 0 {
		return HeaderIter{}
	}
	return HeaderIter{b: r.Headers, p: p, n: n}
}

// Len returns the number of headers not yet returned.
func (h *HeaderIter) Len() int { return int(h.n) }

// Next returns the next header and true, or false when there are no more. Headers decoded
// by Iter are valid; on malformed bytes (a hand-built Record) Next stops early.
func (h *HeaderIter) Next() (RecordHeader, bool) {
	if h.n == 0 {
		return RecordHeader{}, false
	}
	k, p := field(h.b, h.p)
	if p < 0 {
		h.n = 0
		return RecordHeader{}, false
	}
	v, p := field(h.b, p)
	if p < 0 {
		h.n = 0
		return RecordHeader{}, false
	}
	h.n--
	h.p = p
	return RecordHeader{Key: k, Value: v}, true
}
