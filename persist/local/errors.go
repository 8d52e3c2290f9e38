package local

import (
	"errors"
	"fmt"

	"sluice/persist"
)

// Errors returned by the log. Test with errors.Is; the typed forms carry details.
var (
	// ErrCorrupt, ErrDamaged, ErrOffsetOutOfRange, ErrFailed, ErrNoSpace and ErrClosed
	// are the storage seam's errors (package persist), repeated here for callers of this
	// package alone.
	ErrCorrupt          = persist.ErrCorrupt
	ErrDamaged          = persist.ErrDamaged
	ErrOffsetOutOfRange = persist.ErrOffsetOutOfRange
	ErrFailed           = persist.ErrFailed
	ErrNoSpace          = persist.ErrNoSpace
	ErrClosed           = persist.ErrClosed
	// ErrForeignFile is returned by Open for a file that does not belong in a partition
	// directory.
	ErrForeignFile = errors.New("foreign file in partition directory")
	// ErrNotBatchBoundary is returned by Truncate for an offset that is not the last offset
	// of a batch.
	ErrNotBatchBoundary = errors.New("offset is not a batch boundary")
	// ErrBadBatch is returned by Place for a size that is not the header's, and by
	// MemSource.Append for bytes that are not one whole valid batch.
	ErrBadBatch = errors.New("invalid batch")
	// ErrPending is returned by Truncate while bytes placed are not yet durable: the
	// owner persists them first.
	ErrPending = errors.New("placed data not yet persisted")
)

// CorruptionError and OffsetOutOfRangeError are the seam's typed errors (package persist).
type (
	CorruptionError       = persist.CorruptionError
	OffsetOutOfRangeError = persist.OffsetOutOfRangeError
)

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
