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
	// Version is the API version of the request (its header's, not part of the body):
	// it chooses the layout of the answer's parts (FetchMultiResponse.Version).
	Version uint16
}

// SetVersion sets the version from the request header (Request.Decode).
func (r *FetchMultiRequest) SetVersion(v uint16) { r.Version = v }

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
// partitions, with more than MaxFetchPartitions, with a partition listed twice or with a
// negative offset is malformed.
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
	if rd.err == nil {
		if id, dup := repeatedPartition(r.Partitions); dup {
			rd.err = malformed("fetch partition " + i64toa(int64(id)) + " is listed twice")
		}
	}
	return rd.b, rd.err
}

// repeatedPartition returns a partition ps lists twice, if any. Each listed partition
// costs the broker a read and a parked waiter, so a request listing one partition 4096
// times would cost 4096 of them for 12 bytes each on the wire. Without allocating: pairs
// for a few partitions (a consumer's lane holds a handful), a bitmap on the stack for
// more (partition ids beyond it, which no topic has, are left to be answered
// unknown_partition one by one).
func repeatedPartition(ps []FetchMultiPartition) (uint32, bool) {
	if len(ps) <= 32 {
		for i := 1; i < len(ps); i++ {
			for j := range i {
				if ps[i].Partition == ps[j].Partition {
					return ps[i].Partition, true
				}
			}
		}
		return 0, false
	}
	var seen [MaxPartitions / 64]uint64
	for _, p := range ps {
		if p.Partition >= MaxPartitions {
			continue
		}
		w, bit := p.Partition/64, uint64(1)<<(p.Partition%64)
		if seen[w]&bit != 0 {
			return p.Partition, true
		}
		seen[w] |= bit
	}
	return 0, false
}

// FetchMultiResponse answers a fetch_multi request: one part per requested partition, in
// request order.
//
// The frame is laid out for zero copy like a fetch answer: the parts' fixed fields, with
// the exact length of their records, are encoded in user space, and the records go by
// sendfile (segment files) or writev (arena memory), all parts in one response. Versions 0
// and 1 put each part's fields right before its records; version 2 puts every part's
// fields first (the part table) and then the records, part after part, so that a consumer
// learns every part's next offset before the first record arrives.
type FetchMultiResponse struct {
	// Parts are the partitions' answers. Decoding reuses the slice's capacity.
	Parts []FetchPart
	// Version is the layout of the parts: the version of the request answered (a
	// response frame does not say it). Version 1 adds each part's NextOffset; version 2
	// moves every part's fields before the first records. A client sets it before
	// decoding (Response.Decode keeps a body of the right key).
	Version uint16
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
	// NextOffset (versions 1 and 2) is the offset after the part's last batch, the offset a
	// consumer asks for next: with records, the last batch's last offset + 1; without,
	// the offset asked for; -1 with a code other than none. It comes before the
	// records, so that a consumer can send its next request while they arrive. Version 0
	// does not carry it: 0.
	NextOffset int64
	// Records are whole batches, as in FetchResponse; decoding aliases them to the input.
	Records []byte
}

// FetchPartHeaderLen returns the size of a part before its records in a version's layout.
func FetchPartHeaderLen(version uint16) int {
	if version >= 1 {
		return FetchPartHeaderSize + 8
	}
	return FetchPartHeaderSize
}

const (
	// FetchPartHeaderSize is the size of a part before its records in version 0; see
	// FetchPartHeaderLen.
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
	if r.Version >= 2 {
		for i := range r.Parts {
			dst = r.Parts[i].AppendHeader(dst, len(r.Parts[i].Records), r.Version)
		}
		for i := range r.Parts {
			dst = append(dst, r.Parts[i].Records...)
		}
		return dst
	}
	for i := range r.Parts {
		dst = r.Parts[i].AppendHeader(dst, len(r.Parts[i].Records), r.Version)
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

// AppendHeader appends the part's fields before its records in version's layout,
// announcing recordsLen bytes of records (p.Records is ignored). It appends
// FetchPartHeaderLen(version) bytes.
func (p *FetchPart) AppendHeader(dst []byte, recordsLen int, version uint16) []byte {
	dst = le.AppendUint32(dst, p.Partition)
	dst = le.AppendUint16(dst, uint16(p.Code))
	dst = appendI64(appendI64(appendI64(dst, p.HighWatermark), p.LogStartOffset), p.Checkpoint)
	if version >= 1 {
		dst = appendI64(dst, p.NextOffset)
	}
	return le.AppendUint32(dst, uint32(recordsLen))
}

// Decode decodes the response body at the front of b; see Body. A part with an unknown
// code, offsets out of order, or records with a code other than none is malformed. It
// allocates only when Parts has too little capacity.
func (r *FetchMultiResponse) Decode(b []byte) (rest []byte, err error) {
	rd := reader{b: b}
	n := rd.count(FetchPartHeaderLen(r.Version), MaxFetchPartitions, "fetch part")
	r.Parts = r.Parts[:0]
	if r.Version >= 2 {
		// The part table (count checked it fits) and, after it, the records: two readers,
		// one through each, in step.
		size := n * FetchPartHeaderLen(r.Version)
		if rd.err != nil {
			return rd.b, rd.err
		}
		table, recs := reader{b: rd.b[:size]}, reader{b: rd.b[size:]}
		for range n {
			p := decodePartHeader(&table, r.Version)
			p.Records = recs.take(int(table.u32()))
			recs.fail(table.err)
			recs.checkPart(&p, r.Version)
			r.Parts = append(r.Parts, p)
		}
		return recs.b, recs.err
	}
	for range n {
		p := decodePartHeader(&rd, r.Version)
		p.Records = rd.take(int(rd.u32()))
		rd.checkPart(&p, r.Version)
		r.Parts = append(r.Parts, p)
	}
	return rd.b, rd.err
}

// checkPart checks a decoded part (its records taken, nil when none) and records the
// first failure in rd.err.
func (rd *reader) checkPart(p *FetchPart, version uint16) {
	if len(p.Records) == 0 {
		p.Records = nil
	}
	if rd.err == nil {
		rd.err = checkPart(p)
	}
	if rd.err == nil && version >= 1 {
		rd.err = checkNext(p)
	}
}

// decodePartHeader decodes a part's fields up to its records length (which it leaves to
// the caller) in version's layout.
func decodePartHeader(rd *reader, version uint16) FetchPart {
	p := FetchPart{Partition: rd.u32(), Code: Code(rd.u16()), HighWatermark: rd.i64(),
		LogStartOffset: rd.i64(), Checkpoint: rd.i64()}
	if version >= 1 {
		p.NextOffset = rd.i64()
	}
	return p
}

// checkNext checks a version 1 part's next offset: -1 with an error code; after records,
// above 0 and at most the high watermark; without, not negative (the offset asked for,
// which may lie outside the partition when the budget was spent before it was read).
func checkNext(p *FetchPart) error {
	switch {
	case p.Code != CodeNone && p.NextOffset != -1,
		p.Code == CodeNone && p.NextOffset < 0,
		p.Records != nil && (p.NextOffset == 0 || p.NextOffset > p.HighWatermark):
		return malformed("fetch part of partition " + utoa(uint64(p.Partition)) + " with next offset " +
			i64toa(p.NextOffset) + " (code " + p.Code.String() + ", offsets " + i64toa(p.LogStartOffset) +
			"-" + i64toa(p.HighWatermark) + ")")
	}
	return nil
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

// FetchMultiTableSize returns how many bytes of a fetch_multi answer frame of k parts, in
// version 2 (or version 1 with k = 1, the same layout), come before the first records
// when the error text is empty: the frame header, the part count and the part table.
func FetchMultiTableSize(k int) int {
	return FetchMultiFrameHeaderSize + k*FetchPartHeaderLen(2)
}

// PeekNextOffsets reads the part table of a fetch_multi answer of k parts before its
// records have arrived, in version 2, or in version 1 when k is 1 (one part: the same
// layout): hdr is the frame's header (from PeekResponse) and body what follows it, at
// least FetchMultiTableSize(k) - ResponseHeaderSize bytes. It appends each part's
// partition, next offset and records length to dst, in the answer's order. ok is false unless the frame
// is a success with an empty text and k parts, each with code none and a next offset
// that is not negative: then the caller waits for the whole frame (Response.Decode checks
// it all again, records included).
func PeekNextOffsets(hdr ResponseHeader, body []byte, k int, dst []PartNext) (_ []PartNext, ok bool) {
	if hdr.APIKey != APIFetchMulti || hdr.Code != CodeNone || k < 1 || len(body) < FetchMultiTableSize(k)-ResponseHeaderSize {
		return dst, false
	}
	rd := reader{b: body}
	if len(rd.bytes16()) != 0 || rd.u32() != uint32(k) { // the text, the part count
		return dst, false
	}
	for range k {
		p := decodePartHeader(&rd, 2)
		n := rd.u32()
		if rd.err != nil || p.Code != CodeNone || p.NextOffset < 0 {
			return dst, false
		}
		dst = append(dst, PartNext{Partition: p.Partition, NextOffset: p.NextOffset, RecordsLen: n})
	}
	return dst, true
}

// PartNext is what PeekNextOffsets reads of one part: where its records end, and how many
// bytes of them follow the table.
type PartNext struct {
	Partition  uint32
	NextOffset int64
	RecordsLen uint32
}
