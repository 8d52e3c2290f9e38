package wire

import (
	"math"

	"sluice/batch"
)

const (
	// RequestHeaderSize is the size of a request frame's fixed part: the uint32 length,
	// then API key, API version and request id.
	RequestHeaderSize = 12
	// ResponseHeaderSize is the size of a response frame's fixed part: the uint32 length,
	// then request id, API key and error code. The error text follows it.
	ResponseHeaderSize = 12
	// DefaultMaxFrame is the usual limit on a frame's size (length field included): room
	// for one batch of the largest size and the headers around it. A fetch answer holds at
	// least one whole batch, so a client's limit must not be lower than this.
	DefaultMaxFrame = batch.MaxSize + 64<<10
)

// RequestHeader is the fixed header of a request frame, after the length field.
type RequestHeader struct {
	APIKey     APIKey
	APIVersion uint16 // the version of the API's layout; see APIKey.Versions
	RequestID  uint32 // chosen by the client, echoed in the response
}

// ResponseHeader is the fixed header of a response frame, after the length field.
type ResponseHeader struct {
	RequestID uint32 // the request's id
	APIKey    APIKey // the request's API key, echoed even when unknown
	Code      Code   // CodeNone on success
}

// PeekFrame decodes the header of the request frame at the front of b, which may hold only
// a prefix of the frame, and checks it before anything is allocated for the frame:
//
//   - a length announcing more than maxFrame bytes in all (length field included):
//     ErrFrameTooLarge, size 0. This needs only the 4 bytes of the length field, so a
//     peer that sends a huge length and stops is refused at once.
//   - a length too small to hold the header: ErrMalformed, size 0 (also from 4 bytes).
//   - b shorter than RequestHeaderSize otherwise: ErrShort, and size is
//     RequestHeaderSize, the number of bytes b must hold to try again.
//   - an unknown API key or an API version outside APIKey.Versions: ErrUnknownAPI or
//     ErrUnsupportedVersion, with size set.
//
// On success size is the frame's total size, length field included: the frame is
// b[:size] once b holds it. hdr is decoded whenever b holds RequestHeaderSize bytes, even
// on error, so that the caller can answer the request id before closing the connection;
// it is zero when b is shorter.
func PeekFrame(b []byte, maxFrame int) (size int, hdr RequestHeader, err error) {
	if len(b) < 4 {
		return RequestHeaderSize, hdr, ErrShort
	}
	if len(b) >= RequestHeaderSize {
		hdr = RequestHeader{APIKey(le.Uint16(b[4:])), le.Uint16(b[6:]), le.Uint32(b[8:])}
	}
	if size, err = frameSize(le.Uint32(b), maxFrame); err != nil {
		return 0, hdr, err
	}
	if len(b) < RequestHeaderSize {
		return RequestHeaderSize, hdr, ErrShort
	}
	minV, maxV, ok := hdr.APIKey.Versions()
	switch {
	case !ok:
		return size, hdr, &ProtocolError{Code: CodeUnknownAPI, Msg: "unknown API key " + itoa(int(hdr.APIKey))}
	case hdr.APIVersion < minV || hdr.APIVersion > maxV:
		return size, hdr, &ProtocolError{Code: CodeUnsupportedVersion, Msg: hdr.APIKey.String() +
			" version " + itoa(int(hdr.APIVersion)) + ", this broker speaks " + itoa(int(minV)) + " to " + itoa(int(maxV))}
	}
	return size, hdr, nil
}

// PeekResponse decodes the header of the response frame at the front of b, which may hold
// only a prefix of the frame. It returns ErrFrameTooLarge, ErrMalformed and ErrShort (size
// ResponseHeaderSize) like PeekFrame, and does not judge the API key or the code:
// Response.Decode does, once the frame is whole.
func PeekResponse(b []byte, maxFrame int) (size int, hdr ResponseHeader, err error) {
	if len(b) < 4 {
		return ResponseHeaderSize, hdr, ErrShort
	}
	if len(b) >= ResponseHeaderSize {
		hdr = ResponseHeader{le.Uint32(b[4:]), APIKey(le.Uint16(b[8:])), Code(le.Uint16(b[10:]))}
	}
	if size, err = frameSize(le.Uint32(b), maxFrame); err != nil {
		return 0, hdr, err
	}
	if len(b) < ResponseHeaderSize {
		return ResponseHeaderSize, hdr, ErrShort
	}
	return size, hdr, nil
}

// frameSize checks a frame's length field against the limits and returns the frame's
// total size. The arithmetic is in uint64, so no length overflows an int.
func frameSize(length uint32, maxFrame int) (int, error) {
	size := uint64(length) + 4
	switch {
	case maxFrame < 0 || size > uint64(maxFrame):
		return 0, &ProtocolError{Code: CodeFrameTooLarge,
			Msg: "frame of " + utoa(size) + " bytes, the limit is " + itoa(max(maxFrame, 0))}
	case size < RequestHeaderSize: // the same size as ResponseHeaderSize
		return 0, malformed("frame length " + utoa(uint64(length)) + " is shorter than a frame header")
	}
	return int(size), nil
}

// AppendRequestHeader appends the fixed part of a request frame with a length of zero.
// The caller appends the body and then calls FinishFrame with the position the frame
// started at:
//
//	start := len(buf)
//	buf = wire.AppendRequestHeader(buf, hdr)
//	buf = req.AppendTo(buf)
//	wire.FinishFrame(buf, start)
func AppendRequestHeader(dst []byte, hdr RequestHeader) []byte {
	dst = le.AppendUint32(dst, 0)
	dst = le.AppendUint16(dst, uint16(hdr.APIKey))
	dst = le.AppendUint16(dst, hdr.APIVersion)
	return le.AppendUint32(dst, hdr.RequestID)
}

// AppendResponseHeader appends the fixed part of a response frame, with a length of zero,
// and the error text (empty on success; cut to MaxString bytes). The caller appends the
// body, unless hdr.Code is fatal, and then calls FinishFrame as for AppendRequestHeader.
func AppendResponseHeader(dst []byte, hdr ResponseHeader, text string) []byte {
	dst = le.AppendUint32(dst, 0)
	dst = le.AppendUint32(dst, hdr.RequestID)
	dst = le.AppendUint16(dst, uint16(hdr.APIKey))
	dst = le.AppendUint16(dst, uint16(hdr.Code))
	return appendString(dst, text)
}

// FinishFrame sets the length field of the frame that starts at b[start] and ends at the
// end of b.
func FinishFrame(b []byte, start int) { setFrameLen(b, start, 0) }

// setFrameLen sets the length field of the frame at b[start] to cover the rest of b and
// then trailing bytes that the caller sends separately (zero-copy answers). The check is
// two compares, so it is always on rather than behind the invariants tag (which would
// be this package's only import outside the standard library and batch).
func setFrameLen(b []byte, start, trailing int) {
	n := len(b) - start - 4 + trailing
	if start < 0 || n < RequestHeaderSize-4 || uint64(n) > math.MaxUint32 {
		panic("BUG: wire: frame of " + itoa(n) + " bytes after its length field")
	}
	le.PutUint32(b[start:], uint32(n))
}
