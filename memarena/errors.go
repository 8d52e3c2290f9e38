package memarena

import (
	"errors"
	"fmt"
)

// FullError is the type of ErrFull and ErrPartitionFull: memory is full of
// data that is not yet durable (or is held by readers), so nothing could be
// reclaimed. It is a throttle, not a failure: the broker answers "busy, retry
// after" and the append succeeds once the checkpoint advances. Test with
// errors.Is(err, ErrFull), which matches both.
type FullError struct{ what string }

// Error implements error.
func (e *FullError) Error() string { return "memarena: " + e.what + " full of not-yet-durable data" }

// Is makes every FullError match ErrFull.
func (e *FullError) Is(target error) bool { return target == ErrFull }

var (
	// ErrFull: the arena has no free chunk and nothing reclaimable.
	ErrFull error = &FullError{"arena"}
	// ErrPartitionFull: this write buffer reached Config.PartitionMax with
	// data that is not yet durable. errors.Is(ErrPartitionFull, ErrFull).
	ErrPartitionFull error = &FullError{"partition write buffer"}
	// ErrMiss: the offset asked for is no longer (or never was) in memory;
	// the caller reads it from the log.
	ErrMiss = errors.New("memarena: offset not in memory")
	// ErrClosed: the arena or the owner was closed.
	ErrClosed = errors.New("memarena: closed")
	// ErrTooLarge: a batch or a block can never fit (over MaxBatchSize,
	// PartitionMax, or a block over ChunkSize).
	ErrTooLarge = errors.New("memarena: too large")
	// ErrOffsetOrder: a batch's offsets are not the next dense range.
	ErrOffsetOrder = errors.New("memarena: batch offsets out of order")
	// ErrInvalid: an argument breaks the API's rules (an empty batch,
	// offsets out of range); a bug in the caller.
	ErrInvalid = errors.New("memarena: invalid argument")
	// ErrBusy: Arena.Close found chunks still held by spans.
	ErrBusy = errors.New("memarena: chunks still held")
)

// RangeError is WriteBuffer.Range's answer for stream bytes it does not hold
// as data: older than the first batch in memory, past the last, or padding
// between segments. errors.Is(err, ErrMiss) matches it. The persister only
// asks for batches past the checkpoint, which are never reclaimed, so for it
// this error is a bug in the caller's positions.
type RangeError struct {
	From, To   int64 // the range asked for
	First, End int64 // the buffer's batch data lies within [First, End)
}

// Error implements error.
func (e *RangeError) Error() string {
	return fmt.Sprintf("memarena: stream bytes [%d, %d) are not all held as batch data (held within [%d, %d), less padding)",
		e.From, e.To, e.First, e.End)
}

// Is makes every RangeError match ErrMiss.
func (e *RangeError) Is(target error) bool { return target == ErrMiss }
