package wire

// ProduceRequest appends batches to one physical partition (API key 0). Its fields
// carry the client's side of the write window of DESIGN.md §2.
//
// The batch bytes come last, after every variable field, so that a broker can decode the
// header from a peeked prefix of the frame (DecodeFrameHeader), learn where the batches
// start and how long they are, and copy them once, straight into its own memory. A
// client can likewise write the header (AppendFrameHeader) and its batch buffer with one
// writev, without copying the batches.
type ProduceRequest struct {
	// Topic is the topic name. Decoding aliases it to the input.
	Topic []byte
	// Partition is the physical partition id, below the topic's P.
	Partition uint32
	// Version is V, the topic version the client knows. The broker refuses a request
	// whose V is not the current one (CodeVersionMismatch).
	Version uint32
	// Session is S, the partition session the client knows, or 0 before the client has
	// one (its first request to the partition): then only V is checked. The broker
	// refuses a request whose non-zero S is not the current one (CodeSessionMismatch).
	Session uint64
	// ProducerID is the idempotent producer's id (0 when unused), the one every batch of
	// the request carries.
	ProducerID int64
	// WaitDurableMs asks the broker to answer only once its checkpoint C covers the
	// request's last offset (for an empty produce: the partition's last accepted offset),
	// or after this many milliseconds, whichever is first. 0 answers on acceptance.
	WaitDurableMs uint32
	// Batches are whole batches back to back, exactly as docs/format.md §1 lays them out
	// (base offsets 0). Empty (nil) makes an empty produce, which appends nothing and
	// only asks for the newest (V, S, C). Decoding aliases it to the input and does not
	// look inside: the engine validates the batches once they are in its memory.
	Batches []byte
}

// produceFixed is the size of a produce request's fields after the topic name, up to and
// including the batches length: partition 4, V 4, S 8, producer id 8, wait 4, length 4.
const produceFixed = 32

// Key returns APIProduce.
func (r *ProduceRequest) Key() APIKey { return APIProduce }

// AppendTo appends the request body to dst.
func (r *ProduceRequest) AppendTo(dst []byte) []byte {
	dst = r.appendHeader(dst, len(r.Batches))
	return append(dst, r.Batches...)
}

// AppendFrameHeader appends a whole produce request frame except its batches, sized for
// batchesLen bytes of batches that the caller sends right after it (r.Batches is
// ignored). hdr.APIKey must be APIProduce.
func (r *ProduceRequest) AppendFrameHeader(dst []byte, hdr RequestHeader, batchesLen int) []byte {
	if hdr.APIKey != APIProduce {
		panic("BUG: wire: produce frame header with API key " + hdr.APIKey.String())
	}
	start := len(dst)
	dst = AppendRequestHeader(dst, hdr)
	dst = r.appendHeader(dst, batchesLen)
	setFrameLen(dst, start, batchesLen)
	return dst
}

// appendHeader appends the body's fields before the batches, announcing batchesLen bytes.
func (r *ProduceRequest) appendHeader(dst []byte, batchesLen int) []byte {
	dst = appendString(dst, r.Topic)
	dst = le.AppendUint32(dst, r.Partition)
	dst = le.AppendUint32(dst, r.Version)
	dst = le.AppendUint64(dst, r.Session)
	dst = appendI64(dst, r.ProducerID)
	dst = le.AppendUint32(dst, r.WaitDurableMs)
	return le.AppendUint32(dst, uint32(batchesLen))
}

// Decode decodes the request body at the front of b; see Body.
func (r *ProduceRequest) Decode(b []byte) (rest []byte, err error) {
	rd := reader{b: b}
	n := r.decodeHeader(&rd)
	r.Batches = rd.take(int(n))
	if len(r.Batches) == 0 {
		r.Batches = nil
	}
	return rd.b, rd.err
}

// decodeHeader decodes the fields before the batches and returns the batches length.
func (r *ProduceRequest) decodeHeader(rd *reader) uint32 {
	r.Topic = rd.topic()
	r.Partition = rd.u32()
	r.Version = rd.u32()
	r.Session = rd.u64()
	r.ProducerID = rd.i64()
	r.WaitDurableMs = rd.u32()
	return rd.u32()
}

// DecodeFrameHeader decodes the header of a produce request from b, a prefix of the frame
// (from its length field on); size is the frame's total size, from PeekFrame, which has
// checked the frame header. It returns off, where the batches start in the frame: they
// are frame[off:size], of length size-off. r.Batches is set to nil; the caller points it
// at the batches once it has copied them.
//
// If b ends before the header does, it returns ErrShort and off is the number of bytes b
// must hold to try again (off-len(b) more): at most two rounds, since the first learns
// the topic name's length. A header that would run past size, or whose batches length
// disagrees with size, is malformed. The success path allocates nothing: Topic aliases
// b, so the caller looks it up or copies it before it lets go of b.
func (r *ProduceRequest) DecodeFrameHeader(b []byte, size int) (off int, err error) {
	need := RequestHeaderSize + 2
	if len(b) >= need && size >= need {
		need += int(le.Uint16(b[RequestHeaderSize:])) + produceFixed
	}
	if need > size {
		return 0, malformed("produce header of " + itoa(need) + " bytes in a frame of " + itoa(size))
	}
	if len(b) < need {
		return need, ErrShort
	}
	rd := reader{b: b[RequestHeaderSize:need]}
	n := r.decodeHeader(&rd)
	r.Batches = nil
	switch {
	case rd.err != nil:
		return 0, rd.err
	case uint64(n) != uint64(size-need):
		return 0, malformed("produce batches length " + utoa(uint64(n)) + ", the frame holds " + itoa(size-need))
	}
	return need, nil
}

// ProduceResponse answers a produce request. It is the body of every success and of the
// answers with codes version_mismatch, session_mismatch and busy (other errors have no
// body), and carries the broker's current (V, S, C) for the partition: on a mismatch
// that is (V, S', C'), and the client rewinds its send cursor to the first message after
// C' (DESIGN.md §2). A request that failed appended nothing.
type ProduceResponse struct {
	// Version is the topic's current V.
	Version uint32
	// Session is the partition's current S (never 0 once loaded).
	Session uint64
	// Checkpoint is C, the highest offset of the partition that is durable, or -1 when
	// none is.
	Checkpoint int64
	// BaseOffset and LastOffset are the first and last offsets of the request's records,
	// or both -1 when it appended nothing (an empty produce). A resend of batches that
	// were already appended is acknowledged with their original offsets.
	BaseOffset, LastOffset int64
	// RetryAfterMs is set with CodeBusy: the broker's memory is full of data not yet
	// durable, and the client waits this many milliseconds before sending again.
	RetryAfterMs uint32
}

// Key returns APIProduce.
func (r *ProduceResponse) Key() APIKey { return APIProduce }

// AppendTo appends the response body to dst.
func (r *ProduceResponse) AppendTo(dst []byte) []byte {
	dst = le.AppendUint32(dst, r.Version)
	dst = le.AppendUint64(dst, r.Session)
	dst = appendI64(dst, r.Checkpoint)
	dst = appendI64(dst, r.BaseOffset)
	dst = appendI64(dst, r.LastOffset)
	return le.AppendUint32(dst, r.RetryAfterMs)
}

// AppendProduceResponse appends a whole produce response frame to dst, as
// Response{Header: hdr, Text: text, Body: body}.AppendTo would (body nil for none), and
// with the same checks. It takes the body by its own type because a call through the
// Body interface makes the compiler move dst's array and the body to the heap: the
// broker builds each acknowledgment on its stack with this, and answers it with no
// allocation (netio.Conn.RespondCopy).
func AppendProduceResponse(dst []byte, hdr ResponseHeader, text string, body *ProduceResponse) []byte {
	switch code := hdr.Code; {
	case code == CodeNone && body == nil, code.Fatal() && body != nil:
		panic("BUG: wire: produce response with code " + code.String() + " and body " + describeProduce(body))
	case hdr.APIKey != APIProduce:
		panic("BUG: wire: produce body in a " + hdr.APIKey.String() + " response")
	}
	start := len(dst)
	dst = AppendResponseHeader(dst, hdr, text)
	if body != nil {
		dst = body.AppendTo(dst)
	}
	FinishFrame(dst, start)
	return dst
}

func describeProduce(b *ProduceResponse) string {
	if b == nil {
		return "nil"
	}
	return APIProduce.String()
}

// Decode decodes the response body at the front of b; see Body. Offsets below -1, and a
// last offset below the base offset, are malformed.
func (r *ProduceResponse) Decode(b []byte) (rest []byte, err error) {
	rd := reader{b: b}
	r.Version = rd.u32()
	r.Session = rd.u64()
	r.Checkpoint = rd.i64()
	r.BaseOffset = rd.i64()
	r.LastOffset = rd.i64()
	r.RetryAfterMs = rd.u32()
	switch {
	case rd.err != nil:
	case r.Checkpoint < -1 || r.BaseOffset < -1:
		rd.err = malformed("produce response offset below -1")
	case r.LastOffset < r.BaseOffset || r.BaseOffset == -1 && r.LastOffset != -1:
		rd.err = malformed("produce response last offset " + i64toa(r.LastOffset) + " does not follow base offset " + i64toa(r.BaseOffset))
	}
	return rd.b, rd.err
}
