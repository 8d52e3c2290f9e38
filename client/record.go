package client

import "sluice/batch"

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
