package wire

import (
	"errors"
	"strconv"

	"sluice/batch"
)

// ErrShort means the buffer ends before the frame, or the part of it being decoded, does.
// It is not an error to answer: the caller reads more bytes and tries again. Functions
// that can say how many bytes they need return that number beside ErrShort.
var ErrShort = errors.New("cannot decode frame: short buffer")

// The protocol errors the decoders return, one per code. Every decoding error other than
// ErrShort is a *ProtocolError; errors.Is(err, ErrMalformed) holds for every
// *ProtocolError with CodeMalformed, whatever its message, and so on for the others.
var (
	// ErrMalformed: the bytes break the layout of docs/protocol.md.
	ErrMalformed error = &ProtocolError{Code: CodeMalformed}
	// ErrFrameTooLarge: the length field announces a frame larger than the limit.
	ErrFrameTooLarge error = &ProtocolError{Code: CodeFrameTooLarge}
	// ErrUnknownAPI: the request's API key is not in the table.
	ErrUnknownAPI error = &ProtocolError{Code: CodeUnknownAPI}
	// ErrUnsupportedVersion: the API is known but not at the request's API version.
	ErrUnsupportedVersion error = &ProtocolError{Code: CodeUnsupportedVersion}
	// ErrInvalidTopic: a topic name breaks the naming rules (CheckTopicName).
	ErrInvalidTopic error = &ProtocolError{Code: CodeInvalidTopic}
	// ErrInvalidConfig: a topic's partition count or options are out of range.
	ErrInvalidConfig error = &ProtocolError{Code: CodeInvalidConfig}
	// ErrAuthRequired: the broker requires authentication and the connection has not
	// authenticated (or its user was removed since).
	ErrAuthRequired error = &ProtocolError{Code: CodeAuthRequired}
	// ErrAuthFailed: an authentication exchange failed; the broker does not say whether
	// the user or the password was wrong.
	ErrAuthFailed error = &ProtocolError{Code: CodeAuthFailed}
	// ErrNotAuthorized: the connection's user holds no grant for the operation on the
	// topic.
	ErrNotAuthorized error = &ProtocolError{Code: CodeNotAuthorized}
)

// ProtocolError is an error that maps to an error code: the decoders return it for bad
// input, the broker answers it (AppendErrorResponse), and Response.Err returns it to the
// client.
type ProtocolError struct {
	Code Code
	// Msg says what went wrong; empty means the code's default text.
	Msg string
}

// NewError returns a *ProtocolError with code c and message msg.
func NewError(c Code, msg string) *ProtocolError { return &ProtocolError{Code: c, Msg: msg} }

// Error returns "wire: <code name>: <message or default text>".
func (e *ProtocolError) Error() string { return "wire: " + e.Code.String() + ": " + e.Text() }

// Text returns the message, or the code's default text when there is none.
func (e *ProtocolError) Text() string {
	if e.Msg == "" {
		return e.Code.Text()
	}
	return e.Msg
}

// Is reports whether target is a *ProtocolError with the same code, so that
// errors.Is(err, ErrMalformed) ignores the message.
func (e *ProtocolError) Is(target error) bool {
	t, ok := target.(*ProtocolError)
	return ok && t.Code == e.Code
}

// CodeOf returns the error code a broker answers for err: CodeNone for nil, the code of a
// *ProtocolError anywhere in err's chain, the batch codes for the errors of package batch
// (a produce request's batches are checked by the engine, which returns those), malformed
// for ErrShort (a frame that ended early), and CodeInternal for anything else, including
// a *ProtocolError that claims CodeNone.
func CodeOf(err error) Code {
	var pe *ProtocolError
	switch {
	case err == nil:
		return CodeNone
	case errors.As(err, &pe) && pe.Code != CodeNone: // CodeNone in an error is a bug
		return pe.Code
	case errors.Is(err, ErrShort):
		return CodeMalformed
	case errors.Is(err, batch.ErrBadMagic):
		return CodeUnsupportedMagic
	case errors.Is(err, batch.ErrUnknownCodec):
		return CodeUnknownCodec
	case errors.Is(err, batch.ErrCorrupt), errors.Is(err, batch.ErrShort):
		return CodeCorruptBatch
	}
	return CodeInternal
}

// textOf returns the error text a broker answers for err: the message of a
// *ProtocolError, else err's whole text.
func textOf(err error) string {
	var pe *ProtocolError
	if errors.As(err, &pe) {
		return pe.Msg
	}
	return err.Error()
}

// malformed builds a *ProtocolError with CodeMalformed. Like the others below it runs only
// on the error path, where an allocation does not matter.
func malformed(what string) error { return &ProtocolError{Code: CodeMalformed, Msg: what} }

// invalidConfig builds a *ProtocolError with CodeInvalidConfig.
func invalidConfig(what string) error { return &ProtocolError{Code: CodeInvalidConfig, Msg: what} }

// inFrame turns ErrShort from a body decoder into a malformed error: the frame is whole,
// so a body that runs past its end is not a matter of waiting for more bytes.
func inFrame(k APIKey, err error) error {
	if errors.Is(err, ErrShort) {
		return malformed(k.String() + " body ends early")
	}
	return err
}

func itoa(v int) string     { return strconv.Itoa(v) }
func utoa(v uint64) string  { return strconv.FormatUint(v, 10) }
func i64toa(v int64) string { return strconv.FormatInt(v, 10) }
