package engine

import (
	"errors"
	"fmt"

	"sluice/persist"
)

// Errors a partition returns. The broker maps each to a wire error code.
var (
	// ErrVersionMismatch: the request's topic version V is not the partition's.
	ErrVersionMismatch = errors.New("topic version mismatch")
	// ErrSwitching: the partition is switching to a new topic version (Freeze): it
	// appends nothing until the switch is recorded. Retriable: the broker answers busy.
	ErrSwitching = errors.New("partition switching to a new topic version")
	// ErrSessionMismatch: the request's session S is not the partition's (it was reloaded).
	ErrSessionMismatch = errors.New("partition session mismatch")
	// ErrOutOfOrderSequence: a producer's batch does not continue its sequence.
	ErrOutOfOrderSequence = errors.New("out of order producer sequence")
	// ErrInvalidBatch: the bytes are not whole valid batches (CRC, header, size).
	ErrInvalidBatch = errors.New("invalid batch")
	// ErrUnknownTopic and ErrUnknownPartition: no such topic or partition here.
	ErrUnknownTopic     = errors.New("unknown topic")
	ErrUnknownPartition = errors.New("unknown partition")
	// ErrTopicExists: create of a topic that exists with other settings.
	ErrTopicExists = errors.New("topic already exists")
	// ErrInvalidTopic: a bad topic name or settings.
	ErrInvalidTopic = errors.New("invalid topic")
	// ErrDamaged: the partition found damaged acknowledged data, or could not read its
	// producers' sequences, when it loaded; it serves what it can read and takes no
	// writes until an operator repairs it. The same error as persist.ErrDamaged.
	ErrDamaged = persist.ErrDamaged
)

// WindowError carries the partition's current (V, S, C) with a mismatch, so the client can
// rewind to the first message after C and resend (DESIGN §2 step 4).
type WindowError struct {
	Err        error // ErrVersionMismatch or ErrSessionMismatch
	Version    uint32
	Session    uint64
	Checkpoint int64
}

func (e *WindowError) Error() string {
	return fmt.Sprintf("%v: partition is at version %d session %d checkpoint %d", e.Err, e.Version, e.Session, e.Checkpoint)
}

// Unwrap returns ErrVersionMismatch or ErrSessionMismatch.
func (e *WindowError) Unwrap() error { return e.Err }
