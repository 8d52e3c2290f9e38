package batch

import (
	"errors"
	"strconv"
)

// The errors this package returns. Decoding functions return ErrShort, ErrCompressed or a
// *CorruptError; test for them with errors.Is.
//
// ErrShort is not corruption: a reader that has only part of a batch (a torn tail, or a
// header read ahead of the rest) gets it and decides what that means. Everything a batch
// contradicts in its own bytes is a *CorruptError, which matches ErrCorrupt and, for the
// two causes a broker reports with a specific code, ErrBadMagic or ErrUnknownCodec too.
var (
	// ErrShort means the buffer ends before the header or the batch it describes.
	ErrShort = errors.New("cannot decode batch: short buffer")

	// ErrCorrupt is matched by every *CorruptError.
	ErrCorrupt = errors.New("cannot decode batch: corrupt batch")

	// ErrBadMagic is the cause of a *CorruptError whose magic byte is not Magic.
	ErrBadMagic = errors.New("cannot decode batch: unsupported magic")

	// ErrUnknownCodec is the cause of a *CorruptError whose codec bits name no codec.
	ErrUnknownCodec = errors.New("cannot decode batch: unknown codec")

	// ErrCompressed is returned by Iter.Reset and Iter.ResetTrusted for a batch whose
	// records are compressed: decompress them and call Iter.ResetRecords instead.
	ErrCompressed = errors.New("cannot iterate batch: records section is compressed")
)

// CorruptError reports a batch whose bytes break the format of docs/format.md §1.
//
// Pos is the byte position of the offending field, counted from the first byte of the
// batch. For records given to Iter.ResetRecords (a decompressed section) it counts as if
// that section followed the header: HeaderSize plus the position in the section.
type CorruptError struct {
	Pos    int
	Reason string
	// Err is a more specific cause (ErrBadMagic, ErrUnknownCodec) or nil.
	Err error
}

// Error returns "cannot decode batch: corrupt at byte <Pos>: <Reason>".
func (e *CorruptError) Error() string {
	return "cannot decode batch: corrupt at byte " + strconv.Itoa(e.Pos) + ": " + e.Reason
}

// Is reports whether target is ErrCorrupt, so errors.Is(err, ErrCorrupt) holds for every
// *CorruptError.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns the specific cause, if any.
func (e *CorruptError) Unwrap() error { return e.Err }

// corrupt builds a *CorruptError. It is only called on the error path, so the cost of the
// allocation and of formatting the reason does not matter.
func corrupt(pos int, reason string) error {
	return &CorruptError{Pos: pos, Reason: reason}
}

// itoa and utoa keep reason strings free of fmt, which this package does not otherwise need.
func itoa(v int64) string  { return strconv.FormatInt(v, 10) }
func utoa(v uint64) string { return strconv.FormatUint(v, 10) }
