package wire

// FetchMultiRequest reads several physical partitions of one topic in one request (API
// key 6, fetch_multi). It has one long poll and one byte budget for the whole request:
// the broker answers as soon as any of the partitions has records at its offset, or when
// MaxWaitMs passes, with every listed partition in the answer (those without records
// with their offsets and no records).
type FetchMultiRequest struct {
	// Topic is the topic name. Decoding aliases it to the input.
	Topic []byte
	// MaxWaitMs is the long poll: when none of the partitions has a record at its offset,
	// the broker waits up to this many milliseconds for one before answering.
	MaxWaitMs uint32
	// MaxBytes bounds the records of the whole answer: the broker fills partitions in
	// request order, whole batches, until the budget is spent; the first partition with
	// records always gets at least one whole batch, however large.
	MaxBytes uint32
	// Partitions are the partitions to read, each from its offset, in the order the
	// budget is spent (a consumer rotates them so that none is always last). Decoding
	// reuses the slice's capacity.
	Partitions []FetchMultiPartition
}

// FetchMultiPartition is one partition of a multi-partition fetch.
type FetchMultiPartition struct {
	Partition uint32
	// Offset is the first offset wanted, at least 0.
	Offset int64
}

const (
	// fetchMultiPartitionSize is the encoded size of a FetchMultiPartition.
	fetchMultiPartitionSize = 4 + 8
	// MaxFetchPartitions bounds the partitions of one fetch_multi request.
	MaxFetchPartitions = 4096
)

// Key returns APIFetchMulti.
func (r *FetchMultiRequest) Key() APIKey { return APIFetchMulti }

// AppendTo appends the request body to dst.
func (r *FetchMultiRequest) AppendTo(dst []byte) []byte {
	dst = appendString(dst, r.Topic)
	dst = le.AppendUint32(dst, r.MaxWaitMs)
	dst = le.AppendUint32(dst, r.MaxBytes)
	dst = le.AppendUint32(dst, uint32(len(r.Partitions)))
	for _, p := range r.Partitions {
		dst = le.AppendUint32(dst, p.Partition)
		dst = appendI64(dst, p.Offset)
	}
	return dst
}

// Decode decodes the request body at the front of b; see Body. A request without
// partitions, with more than MaxFetchPartitions or with a negative offset is malformed.
// It allocates only when Partitions has too little capacity.
func (r *FetchMultiRequest) Decode(b []byte) (rest []byte, err error) {
	rd := reader{b: b}
	r.Topic = rd.topic()
	r.MaxWaitMs = rd.u32()
	r.MaxBytes = rd.u32()
	n := rd.count(fetchMultiPartitionSize, MaxFetchPartitions, "fetch partition")
	r.Partitions = r.Partitions[:0]
	if rd.err == nil && n == 0 {
		rd.err = malformed("fetch_multi without partitions")
	}
	for range n {
		p := FetchMultiPartition{Partition: rd.u32(), Offset: rd.i64()}
		if rd.err == nil && p.Offset < 0 {
			rd.err = malformed("fetch offset " + i64toa(p.Offset) + " is negative")
		}
		r.Partitions = append(r.Partitions, p)
	}
	return rd.b, rd.err
}

// FetchMultiResponse answers a fetch_multi request: one part per requested partition, in
// request order.
//
// The frame is laid out for zero copy like a fetch answer: each part's fixed fields,
// with the exact length of its records, come right before its records, so the broker
// encodes each part's header in user space and sends the records after it by sendfile
// (segment files) or writev (arena memory), all parts in one response.
type FetchMultiResponse struct {
	// Parts are the partitions' answers. Decoding reuses the slice's capacity.
	Parts []FetchPart
}

// FetchPart is one partition's answer in a FetchMultiResponse.
type FetchPart struct {
	Partition uint32
	// Code is the partition's outcome: CodeNone (records, possibly none), or an error such
	// as offset_out_of_range (offsets set, no records) or not_serving (offsets zero, C -1,
	// no records).
	Code Code
	// HighWatermark, LogStartOffset and Checkpoint are as in FetchResponse.
	HighWatermark  int64
	LogStartOffset int64
	Checkpoint     int64
	// Records are whole batches, as in FetchResponse; decoding aliases them to the input.
	Records []byte
}

const (
	// FetchPartHeaderSize is the size of a part before its records.
	FetchPartHeaderSize = 4 + 2 + 8 + 8 + 8 + 4
	// FetchMultiFrameHeaderSize is the size of a fetch_multi answer frame before its first
	// part when the error text is empty: the frame header and the part count.
	FetchMultiFrameHeaderSize = ResponseHeaderSize + 2 + 4
)

// Key returns APIFetchMulti.
func (r *FetchMultiResponse) Key() APIKey { return APIFetchMulti }

// AppendTo appends the response body to dst.
func (r *FetchMultiResponse) AppendTo(dst []byte) []byte {
	dst = le.AppendUint32(dst, uint32(len(r.Parts)))
	for i := range r.Parts {
		dst = r.Parts[i].AppendHeader(dst, len(r.Parts[i].Records))
		dst = append(dst, r.Parts[i].Records...)
	}
	return dst
}

// AppendFrameHeader appends the start of a fetch_multi answer frame: the frame header
// with an empty error text and the part count, sized for rest more bytes (every part's
// header and records) that the caller sends right after it. It appends
// FetchMultiFrameHeaderSize bytes. hdr.APIKey must be APIFetchMulti and hdr.Code none.
func (r *FetchMultiResponse) AppendFrameHeader(dst []byte, hdr ResponseHeader, parts, rest int) []byte {
	if hdr.APIKey != APIFetchMulti || hdr.Code != CodeNone {
		panic("BUG: wire: fetch_multi frame header for " + hdr.APIKey.String() + " with code " + hdr.Code.String())
	}
	start := len(dst)
	dst = AppendResponseHeader(dst, hdr, "")
	dst = le.AppendUint32(dst, uint32(parts))
	setFrameLen(dst, start, rest)
	return dst
}

// AppendHeader appends the part's fields before its records, announcing recordsLen bytes
// of records (p.Records is ignored). It appends FetchPartHeaderSize bytes.
func (p *FetchPart) AppendHeader(dst []byte, recordsLen int) []byte {
	dst = le.AppendUint32(dst, p.Partition)
	dst = le.AppendUint16(dst, uint16(p.Code))
	return appendFetchOffsets(dst, p.HighWatermark, p.LogStartOffset, p.Checkpoint, recordsLen)
}

// Decode decodes the response body at the front of b; see Body. A part with an unknown
// code, offsets out of order, or records with a code other than none is malformed. It
// allocates only when Parts has too little capacity.
func (r *FetchMultiResponse) Decode(b []byte) (rest []byte, err error) {
	rd := reader{b: b}
	n := rd.count(FetchPartHeaderSize, MaxFetchPartitions, "fetch part")
	r.Parts = r.Parts[:0]
	for range n {
		p := FetchPart{Partition: rd.u32(), Code: Code(rd.u16()), HighWatermark: rd.i64(),
			LogStartOffset: rd.i64(), Checkpoint: rd.i64()}
		p.Records = rd.take(int(rd.u32()))
		if len(p.Records) == 0 {
			p.Records = nil
		}
		if rd.err == nil {
			rd.err = checkPart(&p)
		}
		r.Parts = append(r.Parts, p)
	}
	return rd.b, rd.err
}

// checkPart checks a decoded part's code and offsets.
func checkPart(p *FetchPart) error {
	switch {
	case !p.Code.Known() || p.Code.Fatal():
		return malformed("fetch part of partition " + utoa(uint64(p.Partition)) + " with code " + p.Code.String())
	case p.Code != CodeNone && p.Records != nil:
		return malformed("fetch part of partition " + utoa(uint64(p.Partition)) + " with records and code " + p.Code.String())
	}
	return checkOffsets(p.LogStartOffset, p.HighWatermark, p.Checkpoint)
}
