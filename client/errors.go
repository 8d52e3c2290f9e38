package client

import (
	"context"
	"errors"
	"fmt"

	"sluice/wire"
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
	// ErrNoBroker is returned when no seed broker was given.
	ErrNoBroker = errors.New("client: no broker address")
	// ErrBrokerNoSpace is wrapped by the error of ProduceSync, Flush, WaitPersisted,
	// Close and a blocked Produce when they give up at their context's end while the
	// broker refuses the records because its disk is full (no_space). Until then the
	// producer retries them with backoff: space may come back.
	ErrBrokerNoSpace = errors.New("client: the broker's disk is full")
	// ErrOffsetGap is matched by every *GapError (errors.Is).
	ErrOffsetGap = errors.New("client: fetched offsets are not dense")

	// ErrAuthFailed is matched (errors.Is) by the error of a call whose connection could
	// not authenticate (Auth): an unknown user or a wrong password, which the broker does
	// not tell apart. It is also the error when Auth was given to a broker that has
	// authentication off. Not retried.
	ErrAuthFailed = wire.ErrAuthFailed
	// ErrAuthRequired is matched by the error of a call to a broker that requires
	// authentication, made without Auth (or whose user was removed since). Not retried.
	ErrAuthRequired = wire.ErrAuthRequired
	// ErrNotAuthorized is matched by the error of a call the user holds no grant for:
	// producing, consuming, creating or describing a topic. Not retried.
	ErrNotAuthorized = wire.ErrNotAuthorized
	// ErrTLSMismatch is matched by the error of a call whose connection could not be
	// made because the client's TLS settings do not fit the broker's: TLS to a
	// plaintext port, plaintext to a TLS port, or a certificate one side refused
	// (unknown authority, expired, wrong name, none given). Not retried.
	ErrTLSMismatch = errors.New("client: TLS settings do not match the broker's")
)

// GapError is returned by a Consumer (Err, after Next returns false) when the batches of
// a fetch answer do not continue exactly where reading stood: a gap (offsets missing) or
// an overlap (offsets repeated). The records before it were delivered; none at or past
// it is, and fetching the partition again fails the same way. It means the partition's
// stored data is damaged (a batch's base offset is outside its CRC): an operator must
// repair it (`sluice segment verify` names the batch).
type GapError struct {
	Topic     string
	Partition int
	// Expected is the offset reading stood at: the first batch of an answer must hold
	// it, a later batch must start at it.
	Expected int64
	// Base and Last are the offsets of the batch found instead.
	Base, Last int64
	// First is set when the batch was the first of its answer.
	First bool
}

// Error names the partition, the offset expected and the batch found.
func (e *GapError) Error() string {
	kind := "gap"
	if e.Base < e.Expected {
		kind = "overlap"
	}
	where := "the next batch starts at"
	if e.First {
		where = "the fetch answer starts with a batch at"
	}
	return fmt.Sprintf("offset %s in %s/%d: expected offset %d, %s %d-%d: stored data is damaged",
		kind, e.Topic, e.Partition, e.Expected, where, e.Base, e.Last)
}

// Unwrap returns ErrOffsetGap.
func (e *GapError) Unwrap() error { return ErrOffsetGap }

// BatchError is returned by a Consumer (Err, after Next returns false) when it cannot
// read a batch: its CRC does not match (the stored data is damaged), or its records do
// not decode to what its header says (a broker with broker.trust_records stored what a
// producer sent). The records before it were delivered; the consumer stops there, and
// fetching the partition again fails the same way. Err is the batch's or the codec's
// error (errors.Is(err, batch.ErrCorrupt) holds for both kinds of damage).
//
// An application may choose to lose the batch's records and read on: a new consumer
// with StartPositions({Partition: Next}) starts after it. Next is known only when the
// batch's CRC matched and its neighbours in the fetch answer confirm its offsets (its
// base offset is outside the CRC): the batch before it ends right before it, or the one
// after it starts right after it. Otherwise it is -1, and an operator must repair the
// partition (`sluice segment verify` names the batch).
type BatchError struct {
	Topic     string
	Partition int
	// Offset is where reading stood: the first offset not delivered.
	Offset int64
	// Next is the offset after the batch, or -1 when its header cannot be trusted.
	Next int64
	Err  error
}

// Error names the partition, the offset and, when it is known, where the batch ends.
func (e *BatchError) Error() string {
	s := fmt.Sprintf("cannot read batch of %s/%d at offset %d: %v", e.Topic, e.Partition, e.Offset, e.Err)
	if e.Next >= 0 {
		s += fmt.Sprintf(" (the batch ends before offset %d)", e.Next)
	}
	return s
}

// Unwrap returns the batch's or the codec's error.
func (e *BatchError) Unwrap() error { return e.Err }

// errNoAddress: the metadata names no broker for a partition (it is moving). A fetch
// fails with it and is retried after a metadata refresh.
var errNoAddress = errors.New("no broker serves the partition (its address is empty)")

// refusedError is the error of a producer's wait that ended (ctxErr, its context's
// error) while the broker kept refusing a partition's records with a retriable code
// (cause). It matches both.
type refusedError struct {
	part   int
	cause  error
	ctxErr error
}

// Error puts the cause first: it is what the caller must act on.
func (e *refusedError) Error() string {
	until := "the deadline"
	if errors.Is(e.ctxErr, context.Canceled) {
		until = "canceled"
	}
	return fmt.Sprintf("partition %d: %v (retried until %s)", e.part, e.cause, until)
}

// Unwrap returns the cause and the context's error.
func (e *refusedError) Unwrap() []error { return []error{e.cause, e.ctxErr} }

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
