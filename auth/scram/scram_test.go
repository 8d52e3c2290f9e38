package scram

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// The example exchange of RFC 7677 section 3 (user "user", password "pencil").
const (
	rfcClientFirst = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
	rfcServerFirst = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
	rfcClientFinal = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
	rfcServerFinal = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
)

// TestRFC7677Vector: both sides reproduce the RFC's exchange byte for byte.
func TestRFC7677Vector(t *testing.T) {
	c, err := NewClient("user", "pencil")
	if err != nil {
		t.Fatal(err)
	}
	c.cnonce = "rOprNGfwEbeRWgbNEkqO"
	if got := c.First(); got != rfcClientFirst {
		t.Fatalf("client-first %q", got)
	}
	final, err := c.Final(rfcServerFirst)
	if err != nil || final != rfcClientFinal {
		t.Fatalf("client-final %q, %v", final, err)
	}
	if err := c.Verify(rfcServerFinal); err != nil {
		t.Fatal(err)
	}
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	creds, err := DeriveWithSalt("pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{step: 1, user: "user", creds: creds, known: true, first: strings.TrimPrefix(rfcClientFirst, "n,,"),
		sfirst: rfcServerFirst, nonce: "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"}
	ans, done, err := s.Step(rfcClientFinal)
	if err != nil || !done || ans != rfcServerFinal {
		t.Fatalf("server-final %q %v %v", ans, done, err)
	}
}

// exchange runs a whole exchange between a client with password and a server that
// knows users.
func exchange(t *testing.T, users map[string]Credentials, user, password string) (serverErr, clientErr error) {
	t.Helper()
	s := NewServer(func(u string) (Credentials, bool) { c, ok := users[u]; return c, ok },
		func(u string) Credentials {
			c, _ := DeriveWithSalt("", []byte("dummy:"+u), MinIterations)
			return c
		})
	c, err := NewClient(user, password)
	if err != nil {
		t.Fatal(err)
	}
	sfirst, done, err := s.Step(c.First())
	if err != nil || done {
		t.Fatalf("server-first: %v", err)
	}
	cfinal, err := c.Final(sfirst)
	if err != nil {
		t.Fatal(err)
	}
	sfinal, done, serr := s.Step(cfinal)
	if !done {
		t.Fatal("not done after the client-final message")
	}
	return serr, c.Verify(sfinal)
}

// TestExchange: the right password passes both ways; a wrong one, or an unknown user,
// fails the same way (ErrAuth on both sides, no hint which).
func TestExchange(t *testing.T) {
	creds, err := Derive("s3cret", MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]Credentials{"alice": creds}
	if se, ce := exchange(t, users, "alice", "s3cret"); se != nil || ce != nil {
		t.Fatalf("right password: %v %v", se, ce)
	}
	for _, c := range []struct{ user, pw string }{{"alice", "wrong"}, {"mallory", "s3cret"}} {
		se, ce := exchange(t, users, c.user, c.pw)
		if !errors.Is(se, ErrAuth) || !errors.Is(ce, ErrAuth) {
			t.Fatalf("%s/%s: server %v client %v, want ErrAuth on both", c.user, c.pw, se, ce)
		}
	}
}

// TestServerRefusesMalformed: messages that are not SCRAM are errors, never panics.
func TestServerRefusesMalformed(t *testing.T) {
	for _, first := range []string{"", "n,,", "p=x,,n=a,r=b", "n,,n=a", "n,,r=b", "n,,n=a=b,r=c", "n,,x"} {
		s := NewServer(func(string) (Credentials, bool) { return Credentials{}, false },
			func(string) Credentials { return Credentials{Salt: []byte("s"), Iterations: MinIterations} })
		if _, _, err := s.Step(first); err == nil {
			t.Errorf("client-first %q accepted", first)
		}
	}
	c, _ := NewClient("a", "b")
	for _, sf := range []string{"", "r=x,s=AAAA,i=4096", "r=" + c.cnonce + "x,s=!!,i=4096", "r=" + c.cnonce + "x,s=AAAA,i=1"} {
		if _, err := c.Final(sf); err == nil {
			t.Errorf("server-first %q accepted", sf)
		}
	}
}

// FuzzServer: any pair of client messages is answered or refused, never a panic.
func FuzzServer(f *testing.F) {
	f.Add(rfcClientFirst, rfcClientFinal)
	f.Add("n,,n=a,r=b", "c=biws,r=b,p=AAAA")
	creds, _ := DeriveWithSalt("pencil", []byte("salt"), MinIterations)
	f.Fuzz(func(t *testing.T, first, final string) {
		s := NewServer(func(string) (Credentials, bool) { return creds, true }, func(string) Credentials { return creds })
		if _, done, err := s.Step(first); err != nil || done {
			return
		}
		if _, _, err := s.Step(final); err == nil {
			t.Fatalf("a made-up proof passed: %q %q", first, final)
		}
	})
}

// TestServerProofLast: the proof must be the client-final message's last attribute
// (RFC 5802: client-final-message-without-proof "," proof). A message with it first once
// made the server cut the message at index -1: a panic on input.
func TestServerProofLast(t *testing.T) {
	creds, _ := DeriveWithSalt("pencil", []byte("salt"), MinIterations)
	proof := base64.StdEncoding.EncodeToString(make([]byte, 32))
	for _, final := range []string{
		"p=" + proof + ",c=biws,r=N",
		"c=biws,p=" + proof + ",r=N",
		"c=biws,r=N,p=" + proof + ",x=y",
	} {
		s := &Server{step: 1, user: "user", creds: creds, known: true, first: "n=user,r=N", sfirst: "r=N,s=c2FsdA==,i=4096", nonce: "N"}
		_, done, err := s.Step(final)
		if err == nil || !done || errors.Is(err, ErrAuth) {
			t.Errorf("%q: done %v, %v; want a malformed-message error", final, done, err)
		}
	}
}

// FuzzServerFinal: any client-final message, against a server whose nonce the fuzzer
// can reach ("N"), is answered or refused, never a panic, and never passes with a
// made-up proof. (FuzzServer's server picks a random nonce, so its fuzzer rarely gets
// past the nonce check.)
func FuzzServerFinal(f *testing.F) {
	proof := base64.StdEncoding.EncodeToString(make([]byte, 32))
	f.Add("c=biws,r=N,p=" + proof)
	f.Add("p=" + proof + ",c=biws,r=N")
	creds, _ := DeriveWithSalt("pencil", []byte("salt"), MinIterations)
	f.Fuzz(func(t *testing.T, final string) {
		s := &Server{step: 1, user: "user", creds: creds, known: true, first: "n=user,r=N", sfirst: "r=N,s=c2FsdA==,i=4096", nonce: "N"}
		if _, done, err := s.Step(final); err == nil || !done {
			t.Fatalf("a made-up proof passed: %q", final)
		}
	})
}

// TestServerFirstSameWork: the server makes the pretend credentials for every user,
// known or not, so that its first answer takes the same work either way: answering a
// known user without them was faster by their derivation, and told the user apart from
// an unknown one by the time to the server-first message.
func TestServerFirstSameWork(t *testing.T) {
	creds, err := Derive("s3cret", MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"alice", "mallory"} {
		dummies := 0
		s := NewServer(func(u string) (Credentials, bool) { return creds, u == "alice" },
			func(string) Credentials { dummies++; return creds })
		if _, done, err := s.Step("n,,n=" + user + ",r=abc"); err != nil || done {
			t.Fatalf("%s: client-first refused: %v", user, err)
		}
		if dummies != 1 {
			t.Errorf("%s: pretend credentials made %d times, want once for every user", user, dummies)
		}
	}
}
