package client

import "sluice/batch"

// MaxRecordBytes is the most bytes of key and value (and of headers, each header counting
// 20 bytes more than its key and value) that one record may carry: with the record's own
// encoding (at most recordOverhead bytes) it fills a batch of batch.MaxSize alone.
// Produce refuses a larger record with ErrRecordTooLarge.
const MaxRecordBytes = batch.MaxSize - batch.HeaderSize - recordOverhead

// recordOverhead bounds what a record's encoding adds to its key and value (lengths,
// logical id, timestamp delta, header count), and headerOverhead what a header adds.
const recordOverhead, headerOverhead = 64, 20

// recordSize returns the bytes r counts against MaxRecordBytes.
func recordSize(r *Record) int64 {
	size := int64(len(r.Key) + len(r.Value))
	for _, h := range r.Headers {
		size += int64(len(h.Key) + len(h.Value) + headerOverhead)
	}
	return size
}

// Record is a record to produce.
type Record struct {
	// Key routes the record (LogicalOf) unless UseLogical is set; it is stored with it.
	Key []byte
	// Value is the payload.
	Value []byte
	// Headers are optional key/value pairs stored with the record.
	Headers []batch.RecordHeader
	// Timestamp is in Unix milliseconds; 0 means the time of the Produce call.
	Timestamp int64
	// Logical is the logical partition (0..65535) of the record when UseLogical is set.
	// Otherwise a keyed record goes to LogicalOf(Key), and a keyless one to the first
	// logical id of the partition keyless records currently stick to.
	Logical    uint16
	UseLogical bool
	// Progress is the caller's progress number for this record (Producer.Checkpoint);
	// 0 or less means none.
	Progress int64
}
