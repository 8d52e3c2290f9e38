package persist

import (
	"errors"
	"fmt"
)

// Errors every store reports. Test with errors.Is; the typed forms below carry details.
var (
	// ErrCorrupt marks stored data that fails its checks (CRC, header, offsets). See
	// CorruptionError.
	ErrCorrupt = errors.New("corrupt log data")
	// ErrDamaged is returned by every write to a store that found corruption at or below
	// its durable checkpoint when it was opened: acknowledged data is damaged, and only an
	// operator may decide what to cut (`sluice segment repair`).
	ErrDamaged = errors.New("partition damaged")
	// ErrOffsetOutOfRange is returned for an offset before the log start or after its end.
	ErrOffsetOutOfRange = errors.New("offset out of range")
	// ErrFailed is returned by every write after a write or sync the store could not undo.
	// The partition must be reopened (recovery decides what survived); a sync is never
	// retried, since a failed fsync may have dropped the dirty pages it was meant to save.
	ErrFailed = errors.New("log failed")
	// ErrNoSpace is returned when the disk is full where nothing was written yet (a new
	// file could not be created): nothing was lost and the store stays usable; it accepts
	// placements again once a Persist gets its file.
	ErrNoSpace = errors.New("no space left on device")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("log closed")
)

// CorruptionError names the file, byte position and, when known, the offset of corrupt
// data.
type CorruptionError struct {
	File   string
	Pos    int64
	Offset int64 // the offset expected at Pos; -1 when unknown
	Reason string
}

func (e *CorruptionError) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("corrupt log data in %s at position %d (offset %d): %s", e.File, e.Pos, e.Offset, e.Reason)
	}
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
