package broker

import (
	"bytes"
	"errors"
	"time"

	"sluice/auth"
	"sluice/auth/acl"
	"sluice/auth/scram"
	"sluice/netio"
	"sluice/wire"
)

// session is a connection's authentication, kept with the connection (netio.Conn's
// state) and touched only on its event loop, by Handle. The user is set only when an
// exchange's proof passes, in one step with its grants: a connection is authenticated
// or not, never half.
type session struct {
	c       *netio.Conn
	timeout time.Duration  // AuthConfig.Timeout: how long it may stay unauthenticated
	user    string         // "" while unauthenticated
	snap    *auth.Snapshot // the users and ACLs grants was resolved from
	grants  *acl.Grants    // user's grants in snap; nil allows nothing
	exch    *scram.Server  // an exchange between its two messages; nil otherwise
	from    *auth.Snapshot // while exch is set: the snapshot its client-first was answered from
}

// sessionOf returns c's session, made when it opened (Opened).
func sessionOf(c *netio.Conn) *session {
	if s, ok := c.State().(*session); ok {
		return s
	}
	return newSession(c, 0) // a connection opened before authentication was on: never
}

// newSession gives c a session, unauthenticated: its frames are held to the size of an
// authenticate request until it logs in, and it is closed if it has not within the
// timeout (a zero timeout: never; only for a session made without Opened).
func newSession(c *netio.Conn, timeout time.Duration) *session {
	s := &session{c: c, timeout: timeout}
	c.SetState(s)
	s.logout()
	c.Expire(timeout, errAuthTimeout)
	return s
}

// preAuthFrame is the largest frame of a connection that has not authenticated: an
// authenticate request with both strings at their longest. A larger one is answered
// auth_required and the connection closed, before the broker buffers it.
const preAuthFrame = wire.RequestHeaderSize + 2*(2+wire.MaxString)

var errAuthTimeout = wire.NewError(wire.CodeAuthRequired,
	"no authentication within auth.timeout: the connection closes")

var errPreAuthFrame = wire.NewError(wire.CodeAuthRequired,
	"this broker requires authentication first (a frame this large is refused before it; the connection closes)")

// Opened gives each new connection its session when authentication is on (netio.Opener;
// on the connection's loop, before its first byte is read).
func (b *Broker) Opened(c *netio.Conn) {
	if b.auth != nil {
		newSession(c, b.auth.cfg.Timeout)
	}
}

// current returns the connection's grants under the current snapshot, or ok false when
// it is not authenticated. When the files were reloaded since the last request it
// resolves the user again: a user removed from the users file leaves the connection
// unauthenticated. The common case is a pointer comparison.
func (s *session) current(snap *auth.Snapshot) (g *acl.Grants, ok bool) {
	if s.user == "" {
		return nil, false
	}
	if s.snap != snap {
		if _, known := snap.Users.Lookup(s.user); !known {
			s.logout()
			return nil, false
		}
		s.snap, s.grants = snap, snap.ACL.For(s.user)
	}
	return s.grants, true
}

// login makes the connection user's, with the grants of snap, and lifts the frame limit.
func (s *session) login(user string, snap *auth.Snapshot) {
	s.user, s.snap, s.grants = user, snap, snap.ACL.For(user)
	s.c.LimitFrames(0, nil)
	s.c.Expire(0, nil)
}

// logout makes the connection unauthenticated, its frames held to preAuthFrame. A
// connection that had a user gets the timeout again from now; one that had none keeps
// the time it had (a new exchange every so often does not keep an unauthenticated
// connection open for good).
func (s *session) logout() {
	if s.user != "" {
		s.c.Expire(s.timeout, errAuthTimeout)
	}
	s.user, s.snap, s.grants = "", nil, nil
	s.c.LimitFrames(preAuthFrame, errPreAuthFrame)
}

// Errors of the authenticate API. A failed proof has the code's default text, the same
// for an unknown user and a wrong password.
var (
	errAuthOff       = wire.NewError(wire.CodeAuthFailed, "this broker has authentication off: it cannot prove it holds your credentials")
	errAuthFailed    = wire.NewError(wire.CodeAuthFailed, "")
	errAuthRequired  = wire.NewError(wire.CodeAuthRequired, "")
	errAuthMechanism = wire.NewError(wire.CodeAuthFailed, "unsupported mechanism: this broker speaks "+wire.MechanismSCRAMSHA256)
)

// handleAuthenticate runs one step of a connection's exchange, on its loop. The first
// message of an exchange (no exchange under way) is a client-first: the connection
// loses any user it had, and is answered the server-first. The next is the
// client-final: a passing proof logs the connection in (if a reload since the
// client-first left the user's credentials as they were) and is answered the
// server-final; anything else leaves it unauthenticated and is answered auth_failed
// after the failure delay (answers keep request order, so the connection's next answer
// waits for it too).
func (b *Broker) handleAuthenticate(c *netio.Conn, slot netio.Slot, hdr wire.ResponseHeader, r *wire.AuthenticateRequest) {
	a := b.auth
	if a == nil {
		b.respond(c, slot, hdr, errAuthOff, nil)
		return
	}
	s := sessionOf(c)
	if r.Mechanism != wire.MechanismSCRAMSHA256 {
		s.logout()
		s.exch = nil
		a.invalid.Add(1)
		b.respond(c, slot, hdr, errAuthMechanism, nil)
		return
	}
	if s.exch == nil {
		b.clientFirst(c, slot, hdr, s, r.Payload)
		return
	}
	exch, from := s.exch, s.from
	s.exch, s.from = nil, nil
	answer, _, err := exch.Step(r.Payload)
	snap := a.snap.Load()
	if err == nil && !sameCredentials(from, snap, exch.User()) {
		err = scram.ErrAuth // removed, or given a new password, while the exchange was under way
	}
	if err != nil {
		if errors.Is(err, scram.ErrAuth) {
			a.failed.Add(1)
		} else {
			a.invalid.Add(1)
		}
		b.cfg.Logger.Debug("authentication failed", "remote", c.RemoteAddr()) // no user name: it may be a mistyped password
		b.respondLater(a.cfg.FailureDelay, c, slot, hdr)
		return
	}
	s.login(exch.User(), snap)
	a.ok.Add(1)
	b.cfg.Logger.Debug("authenticated", "user", s.user, "remote", c.RemoteAddr())
	b.respond(c, slot, hdr, nil, &wire.AuthenticateResponse{Payload: answer})
}

// clientFirst starts an exchange: the connection is unauthenticated from here until its
// proof passes.
func (b *Broker) clientFirst(c *netio.Conn, slot netio.Slot, hdr wire.ResponseHeader, s *session, msg string) {
	s.logout()
	snap := b.auth.snap.Load()
	exch := scram.NewServer(snap.Users.Lookup, snap.Users.Fake)
	answer, done, err := exch.Step(msg)
	if err == nil && done {
		err = errors.New("the exchange ended at its first message")
	}
	if err != nil {
		b.auth.invalid.Add(1)
		b.respond(c, slot, hdr, wire.NewError(wire.CodeAuthFailed, "malformed client-first message: "+err.Error()), nil)
		return
	}
	s.exch, s.from = exch, snap
	b.respond(c, slot, hdr, nil, &wire.AuthenticateResponse{Payload: answer})
}

// sameCredentials reports whether user has in snap the credentials it had in from, the
// snapshot its exchange began with: a proof checked against from's credentials may log
// in under snap only then. A user removed, or given a new password, by a reload between
// the exchange's two messages fails it (a client may hold a client-first open as long as
// it likes).
func sameCredentials(from, snap *auth.Snapshot, user string) bool {
	if from == snap {
		return true
	}
	was, _ := from.Users.Lookup(user)
	now, ok := snap.Users.Lookup(user)
	return ok && bytes.Equal(was.StoredKey, now.StoredKey) && bytes.Equal(was.ServerKey, now.ServerKey) &&
		bytes.Equal(was.Salt, now.Salt) && was.Iterations == now.Iterations
}

// respondLater answers auth_failed after delay, from a timer: the loop goes on.
func (b *Broker) respondLater(delay time.Duration, c *netio.Conn, slot netio.Slot, hdr wire.ResponseHeader) {
	time.AfterFunc(delay, func() { b.respond(c, slot, hdr, errAuthFailed, nil) })
}
