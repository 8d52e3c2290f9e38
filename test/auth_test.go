package test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"sluice/auth/acl"
	"sluice/auth/scram"
	"sluice/broker"
	"sluice/client"
	"sluice/persist/vfs"
	"sluice/wire"
)

// The broker's authentication and authorization, in process over raw frames: what a
// connection may do before, during and after an exchange, what a failure tells, which
// grant each API needs, and reloads of the files under open connections.

const (
	alicePW = "correct horse battery staple"
	bobPW   = "Tr0ub4dor&3"
)

// TestAuthExchange: nothing but authenticate is served before an exchange passes; a
// wrong password and an unknown user fail alike (code, text, delay) and leave the
// connection unauthenticated and open; the right password (with the broker's signature
// checked) opens it; a new exchange drops the user at once; no password reaches the log.
func TestAuthExchange(t *testing.T) {
	f := newAuthFiles(t, map[string]string{"alice": alicePW}, "allow alice admin *\n")
	const delay = 300 * time.Millisecond
	b, logs := startAuthBroker(t, f, delay)
	w := dial(t, b.Addr())
	for _, body := range []wire.Body{&wire.MetadataRequest{}, &wire.CreateTopicRequest{Name: "t", Partitions: 1},
		&wire.ProduceRequest{Topic: []byte("t"), Version: 1, Batches: records(0, -1, "v", 1)}} {
		wantCode(t, w.call(body), wire.CodeAuthRequired)
	}

	failure := func(user, pw string) (*wire.Response, time.Duration) {
		start := time.Now()
		r := w.authenticate(user, pw)
		took := time.Since(start)
		wantCode(t, r, wire.CodeAuthFailed)
		if took < delay {
			t.Fatalf("%s's failure answered after %v, under the delay %v", user, took, delay)
		}
		// Still open, and not authenticated.
		wantCode(t, w.call(&wire.ProduceRequest{Topic: []byte("t"), Version: 1, Batches: records(0, -1, "v", 1)}), wire.CodeAuthRequired)
		return r, took
	}
	wrong, _ := failure("alice", "not the password")
	unknown, _ := failure("mallory", alicePW)
	if wrong.Text != unknown.Text || wrong.Body != nil || unknown.Body != nil {
		t.Fatalf("wrong password %q %v, unknown user %q %v: told apart", wrong.Text, wrong.Body, unknown.Text, unknown.Body)
	}
	// Nor does the first answer tell them apart: the same iteration count, a salt of
	// the same length, and the unknown user's the same each time.
	serverFirst := func(user string) (salt, iterations string) {
		r := dial(t, b.Addr()).call(&wire.AuthenticateRequest{Mechanism: wire.MechanismSCRAMSHA256, Payload: "n,,n=" + user + ",r=abc"})
		mustOK(t, r)
		for _, attr := range strings.Split(r.Body.(*wire.AuthenticateResponse).Payload, ",") {
			if v, ok := strings.CutPrefix(attr, "s="); ok {
				salt = v
			}
			if v, ok := strings.CutPrefix(attr, "i="); ok {
				iterations = v
			}
		}
		return salt, iterations
	}
	aliceSalt, aliceIter := serverFirst("alice")
	mallorySalt, malloryIter := serverFirst("mallory")
	again, _ := serverFirst("mallory")
	if aliceIter != malloryIter || len(aliceSalt) != len(mallorySalt) || mallorySalt != again || mallorySalt == aliceSalt {
		t.Fatalf("server-first: alice s=%s i=%s, mallory s=%s i=%s then s=%s", aliceSalt, aliceIter, mallorySalt, malloryIter, again)
	}

	w.login("alice", alicePW)
	createTopic(t, w, "t", 1)
	mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("t"), Version: 1, Batches: records(0, -1, "v", 3)}))

	// A client-first drops the user at once: a request between the two messages is
	// auth_required (and ends the exchange: the next authenticate starts a new one).
	c := w.call(&wire.AuthenticateRequest{Mechanism: wire.MechanismSCRAMSHA256, Payload: "n,,n=alice,r=abc"})
	mustOK(t, c)
	wantCode(t, w.call(&wire.MetadataRequest{}), wire.CodeAuthRequired)
	wantCode(t, w.authenticate("alice", "guess"), wire.CodeAuthFailed)
	wantCode(t, w.call(&wire.MetadataRequest{}), wire.CodeAuthRequired)

	// Malformed exchanges and other mechanisms are auth_failed, never a closed connection.
	wantCode(t, w.call(&wire.AuthenticateRequest{Mechanism: "PLAIN", Payload: "\x00alice\x00" + alicePW}), wire.CodeAuthFailed)
	wantCode(t, w.call(&wire.AuthenticateRequest{Mechanism: wire.MechanismSCRAMSHA256, Payload: "garbage"}), wire.CodeAuthFailed)
	mustOK(t, w.call(&wire.AuthenticateRequest{Mechanism: wire.MechanismSCRAMSHA256, Payload: "n,,n=alice,r=abc"}))
	wantCode(t, w.call(&wire.AuthenticateRequest{Mechanism: wire.MechanismSCRAMSHA256, Payload: "c=biws,r=abc,p=AAAA"}), wire.CodeAuthFailed)
	w.login("alice", alicePW)
	mustOK(t, w.call(&wire.MetadataRequest{}))

	for _, secret := range []string{alicePW, "not the password", "\x00alice\x00"} {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("the log holds a secret %q:\n%s", secret, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "authenticated") || !strings.Contains(logs.String(), "authentication failed") {
		t.Fatalf("the debug log says nothing of the exchanges:\n%s", logs.String())
	}
}

// TestAuthPipelined: requests pipelined behind a failing exchange are answered in order,
// after the delayed failure, and auth_required: pipelining gets nothing past the delay.
func TestAuthPipelined(t *testing.T) {
	f := newAuthFiles(t, map[string]string{"alice": alicePW}, "allow alice admin *\n")
	b, _ := startAuthBroker(t, f, 200*time.Millisecond)
	w := dial(t, b.Addr())
	first := w.call(&wire.AuthenticateRequest{Mechanism: wire.MechanismSCRAMSHA256, Payload: "n,,n=alice,r=abc"})
	mustOK(t, first)
	nonce, _, _ := strings.Cut(strings.TrimPrefix(first.Body.(*wire.AuthenticateResponse).Payload, "r="), ",")
	w.send(&wire.AuthenticateRequest{Mechanism: wire.MechanismSCRAMSHA256,
		Payload: "c=biws,r=" + nonce + ",p=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="})
	w.send(&wire.MetadataRequest{})
	w.send(&wire.CreateTopicRequest{Name: "x", Partitions: 1})
	for _, want := range []wire.Code{wire.CodeAuthFailed, wire.CodeAuthRequired, wire.CodeAuthRequired} {
		wantCode(t, w.recv(), want)
	}
}

// TestAuthorization: each API needs its operation on its topic; a prefix covers the
// topics under it; produce, consume and create imply describe; metadata for every
// topic lists only what the user may describe, and naming a topic the user may not
// describe is not_authorized whether it exists or not.
func TestAuthorization(t *testing.T) {
	f := newAuthFiles(t, map[string]string{"root": "r00t-pw", "alice": alicePW, "bob": bobPW, "carol": "carol-pw"}, `
allow root admin *
allow alice produce orders
allow alice consume,create ev.*
allow bob describe orders
`)
	b, _ := startAuthBroker(t, f, time.Millisecond)
	root := dial(t, b.Addr()).login("root", "r00t-pw")
	createTopic(t, root, "orders", 2)
	createTopic(t, root, "ev.a", 1)
	createTopic(t, root, "secret", 1)
	mustOK(t, root.call(&wire.ProduceRequest{Topic: []byte("ev.a"), Version: 1, Batches: records(0, -1, "e", 2)}))
	alice := dial(t, b.Addr()).login("alice", alicePW)
	bob := dial(t, b.Addr()).login("bob", bobPW)
	carol := dial(t, b.Addr()).login("carol", "carol-pw")

	produce := func(topic string) wire.Body {
		return &wire.ProduceRequest{Topic: []byte(topic), Version: 1, Batches: records(0, -1, "v", 1)}
	}
	fetch := func(topic string) wire.Body {
		return &wire.FetchRequest{Topic: []byte(topic), MaxBytes: 1 << 20}
	}
	cases := []struct {
		who  *wireConn
		name string
		body wire.Body
		want wire.Code
	}{
		{alice, "alice produce orders", produce("orders"), wire.CodeNone},
		{alice, "alice fetch orders", fetch("orders"), wire.CodeNotAuthorized},
		{alice, "alice describe orders", &wire.DescribeTopicRequest{Name: "orders"}, wire.CodeNone}, // implied
		{alice, "alice create orders.x", &wire.CreateTopicRequest{Name: "orders.x", Partitions: 1}, wire.CodeNotAuthorized},
		{alice, "alice produce ev.a", produce("ev.a"), wire.CodeNotAuthorized},
		{alice, "alice fetch ev.a", fetch("ev.a"), wire.CodeNone}, // the prefix
		{alice, "alice fetch_multi ev.a", &wire.FetchMultiRequest{Topic: []byte("ev.a"), MaxBytes: 1 << 20,
			Partitions: []wire.FetchMultiPartition{{Partition: 0}}}, wire.CodeNone},
		{alice, "alice list_offsets ev.a", &wire.ListOffsetsRequest{Topic: []byte("ev.a"), Timestamp: wire.TimestampLatest}, wire.CodeNone},
		{alice, "alice create ev.b", &wire.CreateTopicRequest{Name: "ev.b", Partitions: 1}, wire.CodeNone},
		{alice, "alice create ev", &wire.CreateTopicRequest{Name: "ev", Partitions: 1}, wire.CodeNotAuthorized},
		{alice, "alice fetch secret", fetch("secret"), wire.CodeNotAuthorized},
		{alice, "alice list_offsets secret", &wire.ListOffsetsRequest{Topic: []byte("secret"), Timestamp: wire.TimestampLatest}, wire.CodeNotAuthorized},
		{alice, "alice fetch_multi secret", &wire.FetchMultiRequest{Topic: []byte("secret"), MaxBytes: 1 << 20,
			Partitions: []wire.FetchMultiPartition{{Partition: 0}}}, wire.CodeNotAuthorized},
		{bob, "bob describe orders", &wire.DescribeTopicRequest{Name: "orders"}, wire.CodeNone},
		{bob, "bob produce orders", produce("orders"), wire.CodeNotAuthorized},
		{bob, "bob fetch orders", fetch("orders"), wire.CodeNotAuthorized},
		{bob, "bob metadata orders", &wire.MetadataRequest{Topics: []string{"orders"}}, wire.CodeNone},
		{bob, "bob metadata orders+secret", &wire.MetadataRequest{Topics: []string{"orders", "secret"}}, wire.CodeNotAuthorized},
		{bob, "bob metadata missing", &wire.MetadataRequest{Topics: []string{"nosuch"}}, wire.CodeNotAuthorized},
		{carol, "carol describe orders", &wire.DescribeTopicRequest{Name: "orders"}, wire.CodeNotAuthorized},
		{carol, "carol create c", &wire.CreateTopicRequest{Name: "c", Partitions: 1}, wire.CodeNotAuthorized},
		{carol, "carol produce orders", produce("orders"), wire.CodeNotAuthorized},
		{carol, "carol fetch orders", fetch("orders"), wire.CodeNotAuthorized},
		// Every other API key: topic_layouts needs describe, expand_topic admin (granted,
		// an embedded broker refuses the expansion itself).
		{bob, "bob topic_layouts orders", &wire.TopicLayoutsRequest{Name: "orders"}, wire.CodeNone},
		{carol, "carol topic_layouts orders", &wire.TopicLayoutsRequest{Name: "orders"}, wire.CodeNotAuthorized},
		{alice, "alice expand orders", &wire.ExpandTopicRequest{Name: "orders", Partitions: 4}, wire.CodeNotAuthorized},
		{root, "root expand orders", &wire.ExpandTopicRequest{Name: "orders", Partitions: 4}, wire.CodeInvalidConfig},
	}
	for _, c := range cases {
		r := c.who.call(c.body)
		if r.Header.Code != c.want {
			t.Errorf("%s: %v %q, want %v", c.name, r.Header.Code, r.Text, c.want)
		}
		if c.want == wire.CodeNotAuthorized && !strings.Contains(r.Text, "grant on topic") {
			t.Errorf("%s: text %q does not say which grant is missing", c.name, r.Text)
		}
	}
	listed := func(w *wireConn) []string {
		r := w.call(&wire.MetadataRequest{})
		mustOK(t, r)
		var names []string
		for _, tp := range r.Body.(*wire.MetadataResponse).Topics {
			names = append(names, tp.Name)
		}
		return names
	}
	for who, want := range map[*wireConn][]string{root: {"ev.a", "ev.b", "orders", "secret"},
		alice: {"ev.a", "ev.b", "orders"}, bob: {"orders"}, carol: nil} {
		if got := listed(who); !slices.Equal(got, want) {
			t.Errorf("metadata of every topic: %v, want %v", got, want)
		}
	}
}

// TestAuthReload: the users and ACL files change under open connections: a user added
// authenticates, a user removed loses its connection's authentication at its next
// request, grants added and taken back apply to open connections, and no connection is
// dropped; a file that does not load leaves the previous users in place.
func TestAuthReload(t *testing.T) {
	f := newAuthFiles(t, map[string]string{"alice": alicePW, "bob": bobPW}, "allow alice admin *\nallow bob describe *\n")
	b, logs := startAuthBroker(t, f, time.Millisecond)
	alice := dial(t, b.Addr()).login("alice", alicePW)
	bob := dial(t, b.Addr()).login("bob", bobPW)
	createTopic(t, alice, "orders", 1)
	wantCode(t, bob.call(&wire.FetchRequest{Topic: []byte("orders"), MaxBytes: 1}), wire.CodeNotAuthorized)

	f.addUser("dave", "dave-pw")
	f.grant("bob", acl.Consume, "orders")
	pollFor(t, "dave to be known", func() bool {
		return dial(t, b.Addr()).authenticate("dave", "dave-pw").Header.Code == wire.CodeNone
	})
	pollFor(t, "bob's new grant", func() bool {
		return bob.call(&wire.FetchRequest{Topic: []byte("orders"), MaxBytes: 1}).Header.Code == wire.CodeNone
	})

	if err := removeUser(f.users, "bob"); err != nil {
		t.Fatal(err)
	}
	pollFor(t, "bob's connection to be unauthenticated", func() bool {
		return bob.call(&wire.MetadataRequest{}).Header.Code == wire.CodeAuthRequired
	})
	wantCode(t, bob.authenticate("bob", bobPW), wire.CodeAuthFailed)
	mustOK(t, alice.call(&wire.DescribeTopicRequest{Name: "orders"})) // alice's connection never noticed

	writeFile(t, f.users, "user broken\n")
	pollFor(t, "the failed reload to be logged", func() bool { return strings.Contains(logs.String(), "reload failed") })
	mustOK(t, dial(t, b.Addr()).authenticate("dave", "dave-pw"))
	mustOK(t, alice.call(&wire.MetadataRequest{}))
}

// TestAuthAgainstBrokerWithoutAuth: a client given credentials refuses a broker that
// has authentication off (it cannot prove it holds them), with ErrAuthFailed at once.
func TestAuthAgainstBrokerWithoutAuth(t *testing.T) {
	b, _ := startInProcess(t, vfs.Default(), 1<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := client.NewAdmin(client.Brokers(b.Addr()), client.Auth("alice", alicePW))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Metadata(ctx); !errors.Is(err, client.ErrAuthFailed) || !strings.Contains(err.Error(), "authentication off") {
		t.Fatalf("credentials for a broker without authentication: %v", err)
	}
}

// TestAuthFrameLimit: before it authenticates, a connection may send no frame larger
// than an authenticate request: a larger one is answered auth_required from its length
// field and the connection closes, so an unauthenticated client cannot make the broker
// buffer megabytes. Once authenticated, large frames are served.
func TestAuthFrameLimit(t *testing.T) {
	f := newAuthFiles(t, map[string]string{"alice": alicePW}, "allow alice admin *\n")
	b, _ := startAuthBroker(t, f, time.Millisecond)
	big := &wire.ProduceRequest{Topic: []byte("t"), Version: 1, Batches: records(0, -1, strings.Repeat("x", 1000), 300)}
	w := dial(t, b.Addr())
	r := w.call(&wire.MetadataRequest{}) // small frames are answered and the connection stays
	wantCode(t, r, wire.CodeAuthRequired)
	frame := (&wire.Request{Header: wire.RequestHeader{APIKey: wire.APIProduce, RequestID: 9}, Body: big}).AppendTo(nil)
	go w.conn.Write(frame) // the broker may close before it has all of it: the write's error is expected
	r = w.recv()
	if r.Header.Code != wire.CodeAuthRequired || !strings.Contains(r.Text, "closes") {
		t.Fatalf("a large frame before authentication: %v %q", r.Header.Code, r.Text)
	}
	if _, err := w.readFrame(); err == nil {
		t.Fatal("the connection stayed open after a large frame before authentication")
	}
	w = dial(t, b.Addr()).login("alice", alicePW)
	createTopic(t, w, "t", 1)
	mustOK(t, w.call(big))
}

// TestAuthExchangeAcrossReload: an exchange's proof is checked against the users the
// broker serves when the proof arrives, not those of its client-first. A user removed,
// or whose password was replaced, between the two messages does not log in with the old
// password (a client could hold a client-first open for as long as it likes and finish
// it after it was revoked); an exchange across a reload that left its user as it was
// passes.
func TestAuthExchangeAcrossReload(t *testing.T) {
	f := newAuthFiles(t, map[string]string{"alice": alicePW, "bob": bobPW, "carol": "carol-pw"},
		"allow alice admin *\nallow bob admin *\nallow carol admin *\n")
	b, logs := startAuthBroker(t, f, time.Millisecond)
	type started struct {
		w     *wireConn
		c     *scram.Client
		first string
	}
	start := func(user, pw string) started {
		w := dial(t, b.Addr())
		c, err := scram.NewClient(user, pw)
		if err != nil {
			t.Fatal(err)
		}
		r := w.call(&wire.AuthenticateRequest{Mechanism: wire.MechanismSCRAMSHA256, Payload: c.First()})
		mustOK(t, r)
		return started{w, c, r.Body.(*wire.AuthenticateResponse).Payload}
	}
	finish := func(s started) *wire.Response {
		final, err := s.c.Final(s.first)
		if err != nil {
			t.Fatal(err)
		}
		return s.w.call(&wire.AuthenticateRequest{Mechanism: wire.MechanismSCRAMSHA256, Payload: final})
	}
	reloads := func() int { return strings.Count(logs.String(), "users and ACLs reloaded") }

	alice, bob, carol := start("alice", alicePW), start("bob", bobPW), start("carol", "carol-pw")
	n := reloads()
	if err := removeUser(f.users, "alice"); err != nil {
		t.Fatal(err)
	}
	f.addUserReplacing("bob", "bob's new password")
	pollFor(t, "the reload", func() bool {
		return reloads() > n && dial(t, b.Addr()).authenticate("bob", "bob's new password").Header.Code == wire.CodeNone
	})
	for name, s := range map[string]started{"alice (removed)": alice, "bob (new password)": bob} {
		if r := finish(s); r.Header.Code != wire.CodeAuthFailed {
			t.Errorf("%s finishing an exchange begun before the reload: %v %q, want auth_failed", name, r.Header.Code, r.Text)
		}
		if r := s.w.call(&wire.MetadataRequest{}); r.Header.Code != wire.CodeAuthRequired {
			t.Errorf("%s's next request: %v %q, want auth_required", name, r.Header.Code, r.Text)
		}
	}
	mustOK(t, finish(carol)) // unchanged by the reload
	mustOK(t, carol.w.call(&wire.MetadataRequest{}))
}

// TestAuthTimeout: a connection that has not authenticated within auth.timeout of its
// start is answered auth_required (request id 0) and closed, however many exchanges it
// tried meanwhile; an authenticated one stays open past it; one that loses its user (a
// reload that removed it) gets the timeout again from then. Before, a client that never
// authenticated held its connection for good.
func TestAuthTimeout(t *testing.T) {
	f := newAuthFiles(t, map[string]string{"alice": alicePW, "bob": bobPW}, "allow alice admin *\nallow bob describe *\n")
	const timeout = 700 * time.Millisecond
	b, _ := startInProcessAt(t, t.TempDir(), vfs.Default(), 1<<20, func(c *broker.Config) {
		c.Auth = broker.AuthConfig{UsersFile: f.users, ACLFile: f.acls, FailureDelay: time.Millisecond,
			ReloadInterval: 50 * time.Millisecond, Timeout: timeout}
	})
	closedAfterTimeout := func(w *wireConn, who string) {
		t.Helper()
		r := w.recv()
		if r.Header.Code != wire.CodeAuthRequired || r.Header.RequestID != 0 || !strings.Contains(r.Text, "auth.timeout") {
			t.Fatalf("%s: answered %v %q (id %d), want auth_required for the timeout", who, r.Header.Code, r.Text, r.Header.RequestID)
		}
		if _, err := w.readFrame(); !errors.Is(err, io.EOF) {
			t.Fatalf("%s: the connection is still open after the timeout (%v)", who, err)
		}
	}

	start := time.Now()
	idle := dial(t, b.Addr())
	trying := dial(t, b.Addr())
	alice := dial(t, b.Addr()).login("alice", alicePW)
	bob := dial(t, b.Addr()).login("bob", bobPW)
	for time.Since(start) < timeout/2 { // exchanges that fail do not restart its time
		wantCode(t, trying.authenticate("alice", "wrong"), wire.CodeAuthFailed)
		time.Sleep(50 * time.Millisecond)
	}
	closedAfterTimeout(idle, "a connection that sent nothing")
	closedAfterTimeout(trying, "a connection that kept failing")
	if took := time.Since(start); took < timeout {
		t.Fatalf("closed after %v, before the timeout %v", took, timeout)
	}
	time.Sleep(timeout)
	mustOK(t, alice.call(&wire.MetadataRequest{})) // authenticated: open past the timeout

	if err := removeUser(f.users, "bob"); err != nil {
		t.Fatal(err)
	}
	pollFor(t, "bob's connection to be unauthenticated", func() bool {
		return bob.call(&wire.MetadataRequest{}).Header.Code == wire.CodeAuthRequired
	})
	lost := time.Now()
	closedAfterTimeout(bob, "a connection whose user was removed")
	if took := time.Since(lost); took > 3*timeout {
		t.Fatalf("closed %v after losing its user, timeout %v", took, timeout)
	}
	mustOK(t, alice.call(&wire.MetadataRequest{}))
}
