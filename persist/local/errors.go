package local

import (
	"errors"
	"fmt"
)

// Errors returned by the log. Test with errors.Is; the typed forms carry details.
var (
	// ErrCorrupt marks data that fails its checks (CRC, header, offsets). See CorruptionError.
	ErrCorrupt = errors.New("corrupt log data")
	// ErrOffsetOutOfRange is returned for an offset before the log start or after its end.
	ErrOffsetOutOfRange = errors.New("offset out of range")
	// ErrFailed is returned by every write after a write or fsync the log could not undo.
	// The partition must be reopened (recovery decides what survived); an fsync is never
	// retried, since a failed fsync may have dropped the dirty pages it was meant to save.
	ErrFailed = errors.New("log failed")
	// ErrNoSpace is returned when the disk is full. Nothing was appended; the log is still
	// usable once space is freed.
	ErrNoSpace = errors.New("no space left on device")
	// ErrForeignFile is returned by Open for a file that does not belong in a partition
	// directory.
	ErrForeignFile = errors.New("foreign file in partition directory")
	// ErrNotBatchBoundary is returned by Truncate for an offset that is not the last offset
	// of a batch.
	ErrNotBatchBoundary = errors.New("offset is not a batch boundary")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("log closed")
	// ErrBadBatch is returned by Append for bytes that are not one whole valid batch.
	ErrBadBatch = errors.New("invalid batch")
)

// CorruptionError names the file and byte position of corrupt data.
type CorruptionError struct {
	File   string
	Pos    int64
	Reason string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("corrupt log data in %s at position %d: %s", e.File, e.Pos, e.Reason)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptionError) Unwrap() error { return ErrCorrupt }

// OffsetOutOfRangeError gives the range of offsets the log holds: [Start, End).
type OffsetOutOfRangeError struct {
	Offset, Start, End int64
}

func (e *OffsetOutOfRangeError) Error() string {
	return fmt.Sprintf("offset %d out of range [%d, %d)", e.Offset, e.Start, e.End)
}

// Unwrap makes errors.Is(err, ErrOffsetOutOfRange) true.
func (e *OffsetOutOfRangeError) Unwrap() error { return ErrOffsetOutOfRange }

// ForeignFileError names a file that Open refused.
type ForeignFileError struct {
	Dir, Name string
}

func (e *ForeignFileError) Error() string {
	return fmt.Sprintf("foreign file %q in partition directory %s (move it away to open the log)", e.Name, e.Dir)
}

// Unwrap makes errors.Is(err, ErrForeignFile) true.
func (e *ForeignFileError) Unwrap() error { return ErrForeignFile }

// failedError is the sticky error of a failed log: errors.Is(err, ErrFailed) and
// errors.Is(err, cause) both hold.
type failedError struct{ cause error }

func (e *failedError) Error() string   { return "log failed: " + e.cause.Error() }
func (e *failedError) Unwrap() []error { return []error{ErrFailed, e.cause} }
