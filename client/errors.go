package client

import (
	"errors"
	"fmt"
)

// The errors of this package. Errors from the broker are *wire.ProtocolError values,
// wrapped: test them with errors.Is against the wire package's errors or errors.As.
var (
	// ErrClosed is returned by calls on a closed Producer, Consumer or Admin.
	ErrClosed = errors.New("client: closed")
	// ErrBufferFull is returned by Produce when the producer holds MaxBufferedBytes of
	// records not yet persisted and BlockOnFull(false) was given.
	ErrBufferFull = errors.New("client: producer buffer full")
	// ErrRecordTooLarge is returned by Produce for a record that cannot fit a batch, or
	// that alone exceeds MaxBufferedBytes.
	ErrRecordTooLarge = errors.New("client: record too large")
	// ErrTopicChanged is the cause of failures after the topic's partition count changed
	// under a producer: its records were routed by the old count. Make a new producer.
	ErrTopicChanged = errors.New("client: topic partition count changed")
	// ErrNoBroker is returned when no seed broker was given.
	ErrNoBroker = errors.New("client: no broker address")
)

// UnpersistedError is returned by Producer.Close when some records were not persisted
// before it gave up: they were never accepted, or failed, or were accepted but no
// checkpoint covered them yet. Each of them is in the topic at most once.
type UnpersistedError struct {
	// Records are copies of the records, in produce order within each partition.
	Records []Record
	// Err is why: the producer's failure, or the context's error.
	Err error
}

// Error returns "cannot persist N records: <cause>".
func (e *UnpersistedError) Error() string {
	return fmt.Sprintf("cannot persist %d records: %v", len(e.Records), e.Err)
}

// Unwrap returns the cause.
func (e *UnpersistedError) Unwrap() error { return e.Err }
