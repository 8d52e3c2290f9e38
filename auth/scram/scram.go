// Package scram implements SCRAM-SHA-256 (RFC 5802, RFC 7677) for sluice's
// authentication: the client proves it knows the password without sending it, the
// server proves it holds the user's credentials, and the server stores only a salted,
// iterated derivation (StoredKey, ServerKey), never the password.
//
// The exchange, four messages:
//
//	client-first  n,,n=USER,r=CNONCE
//	server-first  r=CNONCE SNONCE,s=SALT,i=ITERATIONS
//	client-final  c=biws,r=CNONCE SNONCE,p=PROOF
//	server-final  v=SIGNATURE            (or e=invalid-proof)
//
// Channel binding and authorization identities are not supported (gs2 header "n,,").
// User names must not contain ',' or '=' (the RFC's escaping is not needed then).
package scram

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Credentials are what the server stores for a user.
type Credentials struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte // H(ClientKey)
	ServerKey  []byte // HMAC(SaltedPassword, "Server Key")
}

// MinIterations is the least iteration count accepted (RFC 7677 asks for 4096 at least).
const MinIterations = 4096

// ErrAuth is every authentication failure: the server does not say whether the user or
// the password was wrong.
var ErrAuth = errors.New("authentication failed")

// Derive computes a user's credentials from the password with a new random salt.
func Derive(password string, iterations int) (Credentials, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return Credentials{}, err
	}
	return DeriveWithSalt(password, salt, iterations)
}

// DeriveWithSalt computes credentials from a password and a given salt.
func DeriveWithSalt(password string, salt []byte, iterations int) (Credentials, error) {
	if iterations < MinIterations {
		return Credentials{}, fmt.Errorf("scram: %d iterations, at least %d", iterations, MinIterations)
	}
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		return Credentials{}, err
	}
	clientKey := mac(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	return Credentials{Salt: salt, Iterations: iterations, StoredKey: stored[:], ServerKey: mac(salted, "Server Key")}, nil
}

func mac(key []byte, msg string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}

func xor(a, b []byte) []byte {
	out := make([]byte, len(a))
	for i := range a {
		out[i] = a[i] ^ b[i]
	}
	return out
}

// nonce returns a fresh printable nonce.
func nonce() (string, error) {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawStdEncoding.EncodeToString(b), nil
}

// attrs parses "k=v,k=v" into the values of the keys wanted, in order; a missing or
// empty key is an error.
func attrs(msg string, keys ...string) ([]string, error) {
	got := map[string]string{}
	for _, part := range strings.Split(msg, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || len(k) != 1 {
			return nil, fmt.Errorf("scram: malformed attribute %q", part)
		}
		if _, dup := got[k]; !dup {
			got[k] = v
		}
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		v, ok := got[k]
		if !ok || v == "" {
			return nil, fmt.Errorf("scram: attribute %s missing", k)
		}
		out[i] = v
	}
	return out, nil
}

// Server is one server side of an exchange.
type Server struct {
	lookup func(user string) (Credentials, bool)
	step   int
	user   string
	creds  Credentials
	known  bool
	first  string // client-first-bare
	sfirst string // server-first
	nonce  string // the combined nonce
	// dummy makes an unknown user's exchange look like a known one's: a salt derived
	// from the name, so that asking twice gives the same salt.
	dummy func(user string) Credentials
}

// NewServer starts the server side. lookup finds a user's credentials; dummy gives the
// credentials to pretend with for a user lookup does not know (the exchange then fails
// at the proof, exactly as a wrong password does).
func NewServer(lookup func(string) (Credentials, bool), dummy func(string) Credentials) *Server {
	return &Server{lookup: lookup, dummy: dummy}
}

// User returns the user name the client gave (once the first message was read).
func (s *Server) User() string { return s.user }

// Step takes the client's message and returns the server's answer. After the second
// step done is true; err is ErrAuth (wrapped) for a failed proof, another error for a
// malformed message.
func (s *Server) Step(msg string) (answer string, done bool, err error) {
	switch s.step {
	case 0:
		s.step++
		bare, ok := strings.CutPrefix(msg, "n,,")
		if !ok {
			return "", true, errors.New("scram: only gs2 header n,, is supported (no channel binding)")
		}
		v, err := attrs(bare, "n", "r")
		if err != nil {
			return "", true, err
		}
		if strings.ContainsAny(v[0], ",=") {
			return "", true, errors.New("scram: user names may not hold ',' or '='")
		}
		s.user, s.first = v[0], bare
		// The pretend credentials are made for every user, known or not: the answer then
		// costs the same work either way, and its timing does not tell who exists.
		fake := s.dummy(s.user)
		s.creds, s.known = s.lookup(s.user)
		if !s.known {
			s.creds = fake
		}
		sn, err := nonce()
		if err != nil {
			return "", true, err
		}
		s.nonce = v[1] + sn
		s.sfirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(s.creds.Salt) + ",i=" + strconv.Itoa(s.creds.Iterations)
		return s.sfirst, false, nil
	case 1:
		s.step++
		v, err := attrs(msg, "c", "r", "p")
		if err != nil {
			return "", true, err
		}
		if v[0] != "biws" || v[1] != s.nonce {
			return "e=invalid-proof", true, fmt.Errorf("%w: channel binding or nonce mismatch", ErrAuth)
		}
		proof, err := base64.StdEncoding.DecodeString(v[2])
		if err != nil || len(proof) != sha256.Size {
			return "", true, errors.New("scram: malformed proof")
		}
		// The proof is the last attribute (RFC 5802: client-final-message-without-proof
		// "," proof); what comes before it is signed.
		cut := strings.LastIndex(msg, ",p=")
		if cut < 0 || strings.Contains(msg[cut+1:], ",") {
			return "", true, errors.New("scram: the proof is not the last attribute")
		}
		withoutProof := msg[:cut]
		authMsg := s.first + "," + s.sfirst + "," + withoutProof
		clientKey := xor(proof, mac(s.creds.StoredKey, authMsg))
		stored := sha256.Sum256(clientKey)
		if subtle.ConstantTimeCompare(stored[:], s.creds.StoredKey) != 1 || !s.known {
			return "e=invalid-proof", true, ErrAuth
		}
		return "v=" + base64.StdEncoding.EncodeToString(mac(s.creds.ServerKey, authMsg)), true, nil
	}
	return "", true, errors.New("scram: exchange already over")
}

// Client is one client side of an exchange.
type Client struct {
	user, password string
	cnonce         string
	first          string
	serverSig      []byte
}

// NewClient starts the client side for user and password.
func NewClient(user, password string) (*Client, error) {
	if user == "" || strings.ContainsAny(user, ",=") {
		return nil, fmt.Errorf("scram: invalid user name %q", user)
	}
	n, err := nonce()
	if err != nil {
		return nil, err
	}
	return &Client{user: user, password: password, cnonce: n}, nil
}

// First returns the client-first message.
func (c *Client) First() string {
	c.first = "n=" + c.user + ",r=" + c.cnonce
	return "n,," + c.first
}

// Final takes the server-first message and returns the client-final one.
func (c *Client) Final(serverFirst string) (string, error) {
	v, err := attrs(serverFirst, "r", "s", "i")
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(v[0], c.cnonce) || len(v[0]) == len(c.cnonce) {
		return "", errors.New("scram: the server's nonce does not extend ours")
	}
	salt, err := base64.StdEncoding.DecodeString(v[1])
	if err != nil {
		return "", errors.New("scram: malformed salt")
	}
	iter, err := strconv.Atoi(v[2])
	if err != nil || iter < MinIterations || iter > 1<<24 {
		return "", fmt.Errorf("scram: iteration count %q refused", v[2])
	}
	salted, err := pbkdf2.Key(sha256.New, c.password, salt, iter, sha256.Size)
	if err != nil {
		return "", err
	}
	withoutProof := "c=biws,r=" + v[0]
	authMsg := c.first + "," + serverFirst + "," + withoutProof
	clientKey := mac(salted, "Client Key")
	stored := sha256.Sum256(clientKey)
	proof := xor(clientKey, mac(stored[:], authMsg))
	c.serverSig = mac(mac(salted, "Server Key"), authMsg)
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof), nil
}

// Verify checks the server-final message: the server knew the user's credentials.
func (c *Client) Verify(serverFinal string) error {
	if strings.HasPrefix(serverFinal, "e=") {
		return fmt.Errorf("%w: %s", ErrAuth, serverFinal[2:])
	}
	sig, ok := strings.CutPrefix(serverFinal, "v=")
	got, err := base64.StdEncoding.DecodeString(sig)
	if !ok || err != nil || !hmac.Equal(got, c.serverSig) {
		return errors.New("scram: the server's signature is wrong: it does not hold this user's credentials")
	}
	return nil
}
