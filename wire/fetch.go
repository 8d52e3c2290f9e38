package wire

// FetchRequest reads batches of one physical partition from an offset (API key 1).
type FetchRequest struct {
	// Topic is the topic name. Decoding aliases it to the input.
	Topic []byte
	// Partition is the physical partition id.
	Partition uint32
	// Offset is the first offset wanted, at least 0 (a negative offset is malformed).
	Offset int64
	// MaxBytes bounds the records of the answer: whole batches up to this many bytes, but
	// always at least one whole batch when one is available, however large, so that a
	// consumer cannot get stuck behind a batch larger than its limit.
	MaxBytes uint32
	// MaxWaitMs is the long poll: when no record at Offset exists yet, the broker waits up
	// to this many milliseconds for one before answering with no records.
	MaxWaitMs uint32
}

// Key returns APIFetch.
func (r *FetchRequest) Key() APIKey { return APIFetch }

// AppendTo appends the request body to dst.
func (r *FetchRequest) AppendTo(dst []byte) []byte {
	dst = appendString(dst, r.Topic)
	dst = le.AppendUint32(dst, r.Partition)
	dst = appendI64(dst, r.Offset)
	dst = le.AppendUint32(dst, r.MaxBytes)
	return le.AppendUint32(dst, r.MaxWaitMs)
}

// Decode decodes the request body at the front of b; see Body. It allocates nothing.
func (r *FetchRequest) Decode(b []byte) (rest []byte, err error) {
	rd := reader{b: b}
	r.Topic = rd.topic()
	r.Partition = rd.u32()
	r.Offset = rd.i64()
	r.MaxBytes = rd.u32()
	r.MaxWaitMs = rd.u32()
	if rd.err == nil && r.Offset < 0 {
		rd.err = malformed("fetch offset " + i64toa(r.Offset) + " is negative")
	}
	return rd.b, rd.err
}

// FetchResponse answers a fetch request with the partition's offsets and its records.
//
// Every fixed field, and the exact length of the records, come before the records, so
// that the broker encodes the whole frame up to the records (AppendFrameHeader) before the
// records are in user space, and then sends the records with sendfile from a segment file
// or writev from memory. The records are whole batches exactly as stored (docs/format.md
// §1, base offsets set). The first batch holds the offset asked for and may start before
// it: the consumer skips the records below that offset.
//
// An answer with code offset_out_of_range carries the body too, with the partition's
// offsets and no records, so that the consumer can pick a valid offset. Other errors
// have no body.
type FetchResponse struct {
	// HighWatermark is the partition's next offset: one past the last record a reader
	// may see.
	HighWatermark int64
	// LogStartOffset is the partition's first offset still stored.
	LogStartOffset int64
	// Checkpoint is C, the highest durable offset, or -1 when none is.
	Checkpoint int64
	// Records are whole batches back to back. Decoding aliases them to the input; it
	// does not look inside them (the consumer checks each batch with batch.Check).
	Records []byte
}

const (
	// fetchResponseFixed is the size of a fetch response body before its records:
	// high watermark, log start offset, checkpoint, records length.
	fetchResponseFixed = 8 + 8 + 8 + 4
	// FetchFrameHeaderSize is the size of a fetch response frame before its records when
	// the error text is empty, as AppendFrameHeader writes it.
	FetchFrameHeaderSize = ResponseHeaderSize + 2 + fetchResponseFixed
)

// Key returns APIFetch.
func (r *FetchResponse) Key() APIKey { return APIFetch }

// AppendTo appends the response body to dst.
func (r *FetchResponse) AppendTo(dst []byte) []byte {
	dst = r.appendHeader(dst, len(r.Records))
	return append(dst, r.Records...)
}

// AppendFrameHeader appends a whole fetch response frame except its records: the frame
// header with an empty error text, the offsets and the records length, sized for
// recordsLen bytes of records that the caller sends right after it (r.Records is ignored).
// It appends FetchFrameHeaderSize bytes and allocates nothing once dst has room for them.
// hdr.APIKey must be APIFetch and hdr.Code not fatal.
func (r *FetchResponse) AppendFrameHeader(dst []byte, hdr ResponseHeader, recordsLen int) []byte {
	if hdr.APIKey != APIFetch || hdr.Code.Fatal() {
		panic("BUG: wire: fetch frame header for " + hdr.APIKey.String() + " with code " + hdr.Code.String())
	}
	start := len(dst)
	dst = AppendResponseHeader(dst, hdr, "")
	dst = r.appendHeader(dst, recordsLen)
	setFrameLen(dst, start, recordsLen)
	return dst
}

// appendHeader appends the body's fields before the records, announcing recordsLen bytes.
func (r *FetchResponse) appendHeader(dst []byte, recordsLen int) []byte {
	return appendFetchOffsets(dst, r.HighWatermark, r.LogStartOffset, r.Checkpoint, recordsLen)
}

// appendFetchOffsets appends the fields every fetch answer has before its records: the
// partition's high watermark, log start and C, and the records length.
func appendFetchOffsets(dst []byte, next, start, checkpoint int64, recordsLen int) []byte {
	dst = appendI64(dst, next)
	dst = appendI64(dst, start)
	dst = appendI64(dst, checkpoint)
	return le.AppendUint32(dst, uint32(recordsLen))
}

// Decode decodes the response body at the front of b; see Body. Offsets out of the order
// 0 <= log start <= high watermark, -1 <= C < high watermark are malformed.
func (r *FetchResponse) Decode(b []byte) (rest []byte, err error) {
	rd := reader{b: b}
	r.HighWatermark = rd.i64()
	r.LogStartOffset = rd.i64()
	r.Checkpoint = rd.i64()
	r.Records = rd.take(int(rd.u32()))
	if len(r.Records) == 0 {
		r.Records = nil
	}
	if rd.err == nil {
		rd.err = checkOffsets(r.LogStartOffset, r.HighWatermark, r.Checkpoint)
	}
	return rd.b, rd.err
}

// checkOffsets checks the order 0 <= log start <= next offset and -1 <= C < next offset
// that every partition's offsets keep.
func checkOffsets(logStart, next, checkpoint int64) error {
	if logStart < 0 || next < logStart || checkpoint < -1 || checkpoint >= next {
		return malformed("partition offsets out of order: log start " + i64toa(logStart) +
			", next offset " + i64toa(next) + ", checkpoint " + i64toa(checkpoint))
	}
	return nil
}
