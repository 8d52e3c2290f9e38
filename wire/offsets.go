package wire

// Special timestamps of a list_offsets request.
const (
	// TimestampLatest asks for the high watermark: the offset the next record gets.
	TimestampLatest int64 = -1
	// TimestampEarliest asks for the log start: the first offset still stored.
	TimestampEarliest int64 = -2
)

// ListOffsetsRequest asks a partition which offset a timestamp falls at (API key 5): the
// broker answers from its time index, so a consumer starting at a time needs one round
// trip.
type ListOffsetsRequest struct {
	// Topic is the topic name. Decoding aliases it to the input.
	Topic []byte
	// Partition is the physical partition id.
	Partition uint32
	// Timestamp is a Unix time in milliseconds (at least 0), or TimestampLatest or
	// TimestampEarliest; anything else is malformed.
	Timestamp int64
}

// Key returns APIListOffsets.
func (r *ListOffsetsRequest) Key() APIKey { return APIListOffsets }

// AppendTo appends the request body to dst.
func (r *ListOffsetsRequest) AppendTo(dst []byte) []byte {
	dst = appendString(dst, r.Topic)
	dst = le.AppendUint32(dst, r.Partition)
	return appendI64(dst, r.Timestamp)
}

// Decode decodes the request body at the front of b; see Body. It allocates nothing.
func (r *ListOffsetsRequest) Decode(b []byte) (rest []byte, err error) {
	rd := reader{b: b}
	r.Topic = rd.topic()
	r.Partition = rd.u32()
	r.Timestamp = rd.i64()
	if rd.err == nil && r.Timestamp < TimestampEarliest {
		rd.err = malformed("list_offsets timestamp " + i64toa(r.Timestamp) + " is neither a time nor -1 or -2")
	}
	return rd.b, rd.err
}

// ListOffsetsResponse answers a list_offsets request.
type ListOffsetsResponse struct {
	// Offset is the base offset of the first batch whose max timestamp is at least the
	// timestamp asked for, or the high watermark when there is none (and for
	// TimestampLatest), or the log start (for TimestampEarliest).
	Offset int64
	// HighWatermark and LogStartOffset are the partition's offsets, as in a fetch answer.
	HighWatermark  int64
	LogStartOffset int64
}

// Key returns APIListOffsets.
func (r *ListOffsetsResponse) Key() APIKey { return APIListOffsets }

// AppendTo appends the response body to dst.
func (r *ListOffsetsResponse) AppendTo(dst []byte) []byte {
	dst = appendI64(dst, r.Offset)
	dst = appendI64(dst, r.HighWatermark)
	return appendI64(dst, r.LogStartOffset)
}

// Decode decodes the response body at the front of b; see Body. An offset outside
// [log start, high watermark] is malformed.
func (r *ListOffsetsResponse) Decode(b []byte) (rest []byte, err error) {
	rd := reader{b: b}
	r.Offset = rd.i64()
	r.HighWatermark = rd.i64()
	r.LogStartOffset = rd.i64()
	if rd.err == nil {
		if err := checkOffsets(r.LogStartOffset, r.HighWatermark, -1); err != nil {
			rd.err = err
		} else if r.Offset < r.LogStartOffset || r.Offset > r.HighWatermark {
			rd.err = malformed("list_offsets offset " + i64toa(r.Offset) + " outside [" +
				i64toa(r.LogStartOffset) + ", " + i64toa(r.HighWatermark) + "]")
		}
	}
	return rd.b, rd.err
}
