package codec

import (
	"errors"
	"strconv"

	"sluice/batch"
)

// The errors this package returns. Decompressing returns batch.ErrShort when the buffer
// ends before the batch does, the batch package's errors from Decompressor.Iter's checks,
// and a *CorruptError for a records section that its codec cannot decompress to the size
// the header gives. Test for them with errors.Is: every *CorruptError matches
// batch.ErrCorrupt, so a caller that already stops serving a corrupt batch needs no new
// case.
var (
	// ErrUnknownName is the cause of ParseCodec's error for a name that is not a codec.
	ErrUnknownName = errors.New("unknown codec name: want none, zstd, s2 or lz4")
)

// CorruptError reports a records section that does not decompress to the header's
// uncompressed size: the codec refuses the bytes, they decode to a different size, or
// the header asks for a size no batch may have. Its Is method matches batch.ErrCorrupt.
type CorruptError struct {
	Codec batch.Codec
	// Reason says what is wrong, without the codec's name.
	Reason string
	// Err is the codec library's error, batch.ErrUnknownCodec, or nil.
	Err error
}

// Error returns "cannot decompress batch: <codec> records section <Reason>[: <Err>]".
func (e *CorruptError) Error() string {
	s := "cannot decompress batch: " + e.Codec.String() + " records section " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is reports whether target is batch.ErrCorrupt, so that errors.Is(err, batch.ErrCorrupt)
// holds for every *CorruptError.
func (e *CorruptError) Is(target error) bool { return target == batch.ErrCorrupt }

// Unwrap returns the codec library's error or batch.ErrUnknownCodec, if any.
func (e *CorruptError) Unwrap() error { return e.Err }

// corrupt builds a *CorruptError. It runs on the error path only, where allocating does
// not matter.
func corrupt(c batch.Codec, reason string, err error) error {
	return &CorruptError{Codec: c, Reason: reason, Err: err}
}

// sizeMismatch reports a section that decodes to got bytes where the header says want.
func sizeMismatch(c batch.Codec, got, want int) error {
	return corrupt(c, "decodes to "+strconv.Itoa(got)+" bytes, header says "+strconv.Itoa(want), nil)
}
