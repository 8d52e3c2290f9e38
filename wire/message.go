package wire

import "strings"

// Body is the body of a request or a response: what follows the fixed frame header (and,
// in a response, the error text). Every request and response type of this package is a
// Body through its pointer.
type Body interface {
	// Key returns the API the body belongs to.
	Key() APIKey
	// AppendTo appends the encoded body to dst and returns the extended buffer. It does
	// not validate: a body that breaks the rules is refused by the decoder on the other
	// side.
	AppendTo(dst []byte) []byte
	// Decode decodes the body at the front of b into the receiver, overwriting every
	// field, and returns the bytes after it. []byte fields alias b; string fields are
	// copies. It returns ErrShort if b ends early and a *ProtocolError for bytes that
	// break the layout.
	Decode(b []byte) (rest []byte, err error)
}

// Request is a whole request frame.
type Request struct {
	Header RequestHeader
	Body   Body // its Key is Header.APIKey
}

// AppendTo appends the request frame to dst. r.Body.Key() must be r.Header.APIKey.
func (r *Request) AppendTo(dst []byte) []byte {
	if r.Body.Key() != r.Header.APIKey {
		panic("BUG: wire: " + r.Body.Key().String() + " body in a " + r.Header.APIKey.String() + " request")
	}
	start := len(dst)
	dst = AppendRequestHeader(dst, r.Header)
	dst = r.Body.AppendTo(dst)
	FinishFrame(dst, start)
	return dst
}

// Decode decodes the whole request frame at the front of b and returns the bytes after
// it. It checks the header like PeekFrame, so its errors are those of PeekFrame (ErrShort
// also when b holds the header but not the whole frame) and of the body's decoder, where
// a body that does not exactly fill the frame is malformed.
//
// r.Header is set whenever b holds a frame header, even on error, so that the caller can
// answer (a frame refused from its length field alone leaves it unchanged). r.Body is reused when it is of the right API (the steady state allocates
// nothing), else replaced by a new body from the API table.
func (r *Request) Decode(b []byte, maxFrame int) (rest []byte, err error) {
	size, hdr, err := PeekFrame(b, maxFrame)
	if len(b) >= RequestHeaderSize {
		r.Header = hdr
	}
	if err != nil {
		return b, err
	}
	if len(b) < size {
		return b, ErrShort
	}
	if r.Body == nil || r.Body.Key() != hdr.APIKey {
		r.Body = NewRequest(hdr.APIKey)
	}
	if v, ok := r.Body.(versioned); ok {
		v.SetVersion(hdr.APIVersion)
	}
	if err := decodeWhole(r.Body, b[RequestHeaderSize:size]); err != nil {
		return b, err
	}
	return b[size:], nil
}

// versioned is a request body whose layout, or its answer's, depends on the API version
// of the request header: Request.Decode tells it the version before decoding.
type versioned interface{ SetVersion(v uint16) }

// decodeWhole decodes body from b, which must hold it exactly.
func decodeWhole(body Body, b []byte) error {
	left, err := body.Decode(b)
	if err != nil {
		return inFrame(body.Key(), err)
	}
	if len(left) != 0 {
		return malformed(itoa(len(left)) + " bytes after the " + body.Key().String() + " body")
	}
	return nil
}

// Response is a whole response frame.
type Response struct {
	Header ResponseHeader
	// Text is the error text; empty on success, and when the code's default text applies.
	Text string
	// Body is the API's answer. It is always there on success and never with a fatal
	// code. With other codes it is optional: an answer that has something to report
	// (the current (V, S', C') of a rejected produce, the delay of a busy one, the
	// offsets of a fetch out of range) carries it, others end after the text. When
	// decoding, it is also nil for a code this package does not know.
	Body Body
}

// Err returns nil if the response is a success, else a *ProtocolError with its code and
// text. A response with an error may still carry a body that matters; see Body.
//
// The text is the error's message, without the "wire: <code name>: " that Error puts
// before it. A sender that put a whole Error() string on the wire (the broker did) would
// have it printed twice ("wire: unknown_topic: wire: unknown_topic: ..."), so Err drops
// that prefix when the text starts with it for the answer's own code.
func (r *Response) Err() error {
	if r.Header.Code == CodeNone {
		return nil
	}
	msg := strings.TrimPrefix(r.Text, "wire: "+r.Header.Code.String()+": ")
	return &ProtocolError{Code: r.Header.Code, Msg: msg}
}

// AppendTo appends the response frame to dst. r.Body must follow the rules of its
// field's comment, and be of the header's API.
func (r *Response) AppendTo(dst []byte) []byte {
	code := r.Header.Code
	switch {
	case code == CodeNone && r.Body == nil, code.Fatal() && r.Body != nil:
		panic("BUG: wire: response with code " + code.String() + " and body " + describe(r.Body))
	case r.Body != nil && r.Body.Key() != r.Header.APIKey:
		panic("BUG: wire: " + r.Body.Key().String() + " body in a " + r.Header.APIKey.String() + " response")
	}
	start := len(dst)
	dst = AppendResponseHeader(dst, r.Header, r.Text)
	if r.Body != nil {
		dst = r.Body.AppendTo(dst)
	}
	FinishFrame(dst, start)
	return dst
}

func describe(b Body) string {
	if b == nil {
		return "nil"
	}
	return b.Key().String()
}

// Decode decodes the whole response frame at the front of b and returns the bytes after
// it. Its errors are those of PeekResponse (and ErrShort until the frame is whole) and
// ErrMalformed for a body that breaks the layout, a success without a body, bytes after
// a fatal answer's text, or a body for an unknown API key. The body of an answer whose
// code is unknown is skipped. r.Body is reused when it is of the right API.
func (r *Response) Decode(b []byte, maxFrame int) (rest []byte, err error) {
	size, hdr, err := PeekResponse(b, maxFrame)
	if err != nil {
		return b, err
	}
	if len(b) < size {
		return b, ErrShort
	}
	r.Header = hdr
	rd := reader{b: b[ResponseHeaderSize:size]}
	r.Text = rd.str()
	switch {
	case rd.err != nil:
		return b, malformed("response ends inside its error text")
	case !hdr.Code.Known(), hdr.Code != CodeNone && len(rd.b) == 0:
		r.Body = nil
	case hdr.Code.Fatal():
		return b, malformed(itoa(len(rd.b)) + " bytes after the text of a " + hdr.Code.String() + " answer")
	case !hdr.APIKey.Known():
		return b, malformed("response for unknown API key " + itoa(int(hdr.APIKey)))
	default:
		if r.Body == nil || r.Body.Key() != hdr.APIKey {
			r.Body = NewResponse(hdr.APIKey)
		}
		if err := decodeWhole(r.Body, rd.b); err != nil {
			return b, err
		}
	}
	return b[size:], nil
}

// AppendErrorResponse appends the answer to the request with header hdr that failed with
// err: code CodeOf(err), the error's text, and no body (a broker that has fields to
// report, such as the current (V, S', C') of a rejected produce, encodes a Response
// itself). This is what the broker sends for a frame it could not decode, before it
// closes the connection. err must not be nil.
func AppendErrorResponse(dst []byte, hdr RequestHeader, err error) []byte {
	if err == nil {
		panic("BUG: wire: AppendErrorResponse without an error")
	}
	resp := Response{Header: ResponseHeader{hdr.RequestID, hdr.APIKey, CodeOf(err)}, Text: textOf(err)}
	return resp.AppendTo(dst)
}
