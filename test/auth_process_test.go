package test

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"sluice/auth/acl"
	"sluice/client"
	"sluice/internal/testbroker"
	"sluice/wire"
)

// TestAuthOverTLS: a broker process with TLS and authentication on serves the Go client
// with credentials (an admin, a producer's links, also once the broker restarted under
// them, a consumer's lanes), refuses the
// wrong password, a client without credentials and a user without grants with the
// client's errors and at once (no retries), takes a user added to the file on SIGHUP
// (its reload interval is an hour), counts the exchanges, and never logs a password,
// even at debug level.
func TestAuthOverTLS(t *testing.T) {
	const failureDelay = 200 * time.Millisecond
	ca := newPKI(t, "sluice-test")
	cert, key := ca.valid("broker", 10, false)
	f := newAuthFiles(t, map[string]string{"alice": alicePW, "bob": bobPW, "carol": "carol-pw"},
		"allow alice admin *\nallow bob produce,consume orders.*\n")
	b := testbroker.Start(t, t.TempDir(), "-metrics", "127.0.0.1:0", "-tls.cert", cert, "-tls.key", key,
		"-auth.users", f.users, "-auth.failure_delay", failureDelay.String(), "-auth.reload_interval", "1h", "-log-level", "debug")
	good := &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	as := func(user, pw string) []client.Opt {
		return []client.Opt{client.Brokers(b.Addr), client.TLS(good), client.Auth(user, pw)}
	}

	a, err := client.NewAdmin(as("alice", alicePW)...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.CreateTopic(ctx, "orders.eu", 4, wire.TopicOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := client.NewProducer(ctx, "orders.eu", as("bob", bobPW)...)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if i == 100 { // the producer's links reconnect, and authenticate again
			if _, err := p.ProduceSync(ctx, &client.Record{Value: []byte("v")}, client.AckPersisted); err != nil {
				t.Fatal(err)
			}
			if err := b.Stop(); err != nil {
				t.Fatal(err)
			}
			b.Restart()
		}
		if err := p.Produce(ctx, &client.Record{Key: []byte{byte(i)}, Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := client.NewConsumer(ctx, "orders.eu", append(as("bob", bobPW), client.Start(client.Oldest()))...)
	if err != nil {
		t.Fatal(err)
	}
	for read := 0; read < 201; {
		if err := c.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		for c.Next() {
			read++
		}
	}
	c.Close()

	refused := func(what string, want error, opts []client.Opt) (time.Duration, error) {
		t.Helper()
		start := time.Now()
		_, err := client.NewProducer(ctx, "orders.eu", opts...)
		took := time.Since(start)
		if !errors.Is(err, want) || took > 10*time.Second {
			t.Fatalf("%s: %v after %v, want %v at once", what, err, took, want)
		}
		return took, err
	}
	// A wrong password for a known user and an unknown user: the same code and text
	// (but for the name the client says it used), each after the failure delay.
	tookWrong, wrong := refused("a wrong password", client.ErrAuthFailed, as("bob", "hunter2"))
	tookUnknown, unknown := refused("an unknown user", client.ErrAuthFailed, as("mallory", bobPW))
	if !client.IsCode(wrong, wire.CodeAuthFailed) || !client.IsCode(unknown, wire.CodeAuthFailed) ||
		strings.ReplaceAll(wrong.Error(), " as bob:", " as USER:") != strings.ReplaceAll(unknown.Error(), " as mallory:", " as USER:") ||
		!strings.Contains(wrong.Error(), "unknown user or wrong password") {
		t.Fatalf("a wrong password and an unknown user told apart:\n%v\n%v", wrong, unknown)
	}
	if tookWrong < failureDelay || tookUnknown < failureDelay {
		t.Fatalf("failures answered after %v (wrong password) and %v (unknown user), under the delay %v", tookWrong, tookUnknown, failureDelay)
	}
	refused("no credentials", client.ErrAuthRequired, []client.Opt{client.Brokers(b.Addr), client.TLS(good)})
	refused("no grant", client.ErrNotAuthorized, as("carol", "carol-pw"))

	// erin is added to the file: the broker learns of it on SIGHUP only.
	f.addUser("erin", "erin-pw")
	f.grant("erin", acl.Create, "*")
	ea, err := client.NewAdmin(as("erin", "erin-pw")...)
	if err != nil {
		t.Fatal(err)
	}
	defer ea.Close()
	if _, err := ea.Metadata(ctx); !errors.Is(err, client.ErrAuthFailed) {
		t.Fatalf("erin before the reload: %v", err)
	}
	syscall.Kill(b.Pid(), syscall.SIGHUP)
	waitFor(t, "erin after SIGHUP", func() bool {
		_, err := ea.CreateTopic(ctx, "erins", 1, wire.TopicOptions{})
		return err == nil
	})

	for sample, least := range map[string]float64{`sluice_auth_total{result="ok"}`: 4, `sluice_auth_total{result="failed"}`: 3,
		`sluice_auth_refused_requests_total{code="auth_required"}`: 1, `sluice_auth_refused_requests_total{code="not_authorized"}`: 1,
		`sluice_auth_reloads_total{result="ok"}`: 1} {
		if got := testbroker.Scrape(t, b.MetricsAddr, sample); got < least {
			t.Errorf("%s = %v, want at least %v", sample, got, least)
		}
	}
	log := b.Log()
	for _, secret := range []string{alicePW, bobPW, "carol-pw", "erin-pw", "hunter2"} {
		if strings.Contains(log, secret) {
			t.Fatalf("the broker's log holds the password %q", secret)
		}
	}
	if !strings.Contains(log, "users and ACLs reloaded") {
		t.Fatalf("no reload in the log:\n%s", log)
	}
}

// TestProducerRefusedOnReconnect: records wait in a producer while its broker is down;
// the broker comes back without the producer's user, so every reconnection is refused.
// Flush and Close return that refusal (the link stops reconnecting) instead of waiting
// for their contexts to end, and no record is reported written.
func TestProducerRefusedOnReconnect(t *testing.T) {
	f := newAuthFiles(t, map[string]string{"alice": alicePW, "bob": bobPW},
		"allow alice admin *\nallow bob produce,consume orders\n")
	b := testbroker.Start(t, t.TempDir(), "-auth.users", f.users, "-auth.failure_delay", "10ms",
		"-auth.reload_interval", "1h")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := client.NewAdmin(client.Brokers(b.Addr), client.Auth("alice", alicePW))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.CreateTopic(ctx, "orders", 2, wire.TopicOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := client.NewProducer(ctx, "orders", client.Brokers(b.Addr), client.Auth("bob", bobPW))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.ProduceSync(ctx, &client.Record{Value: []byte("before")}, client.AckPersisted); err != nil {
		t.Fatal(err)
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	for i := range 10 { // buffered while the links redial a broker that is down
		if err := p.Produce(ctx, &client.Record{Key: []byte{byte(i)}, Value: []byte("waiting")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := removeUser(f.users, "bob"); err != nil {
		t.Fatal(err)
	}
	b.Restart()

	// Bounded by 30 s, not ctx: a producer that never gives up fails with DeadlineExceeded.
	wait, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	if err := p.Flush(wait); !errors.Is(err, client.ErrAuthFailed) {
		t.Fatalf("flush after the broker refused the producer's user: %v, want %v", err, client.ErrAuthFailed)
	}
	err = p.Close(wait)
	var ue *client.UnpersistedError
	if !errors.Is(err, client.ErrAuthFailed) || !errors.As(err, &ue) || len(ue.Records) != 10 {
		t.Fatalf("close: %v, want %v with the 10 records not written", err, client.ErrAuthFailed)
	}
	if wait.Err() != nil {
		t.Fatal("the producer waited out its context")
	}
}
