package wire

// MechanismSCRAMSHA256 is the one authentication mechanism brokers speak: SCRAM-SHA-256
// (RFC 5802, RFC 7677), two round trips of the authenticate API.
const MechanismSCRAMSHA256 = "SCRAM-SHA-256"

// AuthenticateRequest carries one client message of an authentication exchange (API
// key 7): the client-first message of SCRAM, then, in a second request on the same
// connection, the client-final message. The broker keeps the exchange's state with the
// connection; docs/protocol.md §5 and docs/security.md say how it goes.
type AuthenticateRequest struct {
	// Mechanism names the exchange; MechanismSCRAMSHA256 is the only one served.
	Mechanism string
	// Payload is the mechanism's message, as RFC 5802 writes it.
	Payload string
}

// Key returns APIAuthenticate.
func (r *AuthenticateRequest) Key() APIKey { return APIAuthenticate }

// AppendTo appends the request body to dst.
func (r *AuthenticateRequest) AppendTo(dst []byte) []byte {
	dst = appendString(dst, r.Mechanism)
	return appendString(dst, r.Payload)
}

// Decode decodes the request body at the front of b; see Body. Any strings decode: a
// mechanism the broker does not speak, or a payload that is not a SCRAM message, is
// answered auth_failed by the broker, not refused as malformed.
func (r *AuthenticateRequest) Decode(b []byte) (rest []byte, err error) {
	rd := reader{b: b}
	r.Mechanism = rd.str()
	r.Payload = rd.str()
	return rd.b, rd.err
}

// AuthenticateResponse answers an authenticate request with the broker's message: the
// server-first message of SCRAM after the client-first, the server-final one (the
// broker's proof that it holds the user's credentials) after a client-final that
// passed. A failed exchange is answered auth_failed without a body.
type AuthenticateResponse struct {
	Payload string
}

// Key returns APIAuthenticate.
func (r *AuthenticateResponse) Key() APIKey { return APIAuthenticate }

// AppendTo appends the response body to dst.
func (r *AuthenticateResponse) AppendTo(dst []byte) []byte { return appendString(dst, r.Payload) }

// Decode decodes the response body at the front of b; see Body.
func (r *AuthenticateResponse) Decode(b []byte) (rest []byte, err error) {
	rd := reader{b: b}
	r.Payload = rd.str()
	return rd.b, rd.err
}
