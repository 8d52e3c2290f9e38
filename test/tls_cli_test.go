package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice/internal/testbroker"
)

// The console tools' --tls-ca, --tls-cert and --tls-key against broker processes, with
// certificates made here.

// sluiceWant runs sluice and fails the test unless it exits with want and its standard
// error holds each of says; it returns the standard output.
func sluiceWant(t *testing.T, want int, stdin string, args []string, says ...string) string {
	t.Helper()
	code, out, errOut := testbroker.Run(t, stdin, args...)
	ok := code == want
	for _, s := range says {
		ok = ok && strings.Contains(errOut, s)
	}
	if !ok {
		t.Fatalf("sluice %s: exit %d, want %d with %q\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, says, out, errOut)
	}
	return out
}

// TestConsoleToolsTLS: topic create and describe, produce and consume round-trip records
// through a broker serving TLS (trusting its CA with --tls-ca), also with a client
// certificate it did not ask for; and through one that requires client certificates
// (tls.client_ca) and authentication, with --tls-cert/--tls-key and --user together.
// Each missing or wrong piece exits 1 with an error that names it: no --tls-ca (the
// broker's tls_required), a CA that did not sign the broker's certificate, no client
// certificate where one is required, a wrong password; a CA file that is not there is a
// usage error (exit 2) that names the flag.
func TestConsoleToolsTLS(t *testing.T) {
	ca := newPKI(t, "sluice-test")
	cert, key := ca.valid("broker", 10, false)
	appCert, appKey := ca.valid("app", 11, true)
	roundTrip := func(who string, conn []string) {
		t.Helper()
		out := sluiceWant(t, 0, "", append([]string{"topic", "create", "lines", "--partitions", "2"}, conn...))
		if !strings.Contains(out, "created topic lines") || !strings.Contains(out, "2 partitions") {
			t.Fatalf("%s: topic create: %s", who, out)
		}
		if out := sluiceWant(t, 0, "", append([]string{"topic", "describe", "lines"}, conn...)); !strings.Contains(out, "topic lines version 1 partitions 2") {
			t.Fatalf("%s: topic describe: %s", who, out)
		}
		sluiceWant(t, 0, "k1 one\nk2 two\nk1 three\n", append([]string{"produce", "--topic", "lines", "--key", "--acks", "persisted"}, conn...))
		out = sluiceWant(t, 0, "", append([]string{"consume", "--topic", "lines", "--from", "oldest", "--max", "3"}, conn...))
		got := strings.Fields(out)
		if len(got) != 3 || !strings.Contains(out, "one") || !strings.Contains(out, "two") || !strings.Contains(out, "three") {
			t.Fatalf("%s: consume: %q, want one, two and three", who, out)
		}
	}

	// TLS alone: --tls-ca is enough, and a client certificate the broker does not ask
	// for does no harm.
	plain := testbroker.Start(t, t.TempDir(), "-tls.cert", cert, "-tls.key", key)
	roundTrip("TLS", []string{"--broker", plain.Addr, "--tls-ca", ca.file})
	sluiceWant(t, 0, "", []string{"topic", "describe", "lines", "--broker", plain.Addr, "--tls-ca", ca.file,
		"--tls-cert", appCert, "--tls-key", appKey})

	// Client certificates and authentication required.
	f := newAuthFiles(t, map[string]string{"alice": alicePW}, "allow alice admin *\n")
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte(alicePW+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := testbroker.Start(t, t.TempDir(), "-tls.cert", cert, "-tls.key", key, "-tls.client_ca", ca.file,
		"-auth.users", f.users, "-auth.failure_delay", "10ms")
	creds := []string{"--user", "alice", "--password-file", pw}
	mtls := []string{"--broker", b.Addr, "--tls-ca", ca.file, "--tls-cert", appCert, "--tls-key", appKey}
	roundTrip("mTLS and authentication", append(mtls, creds...))

	describe := []string{"topic", "describe", "lines", "--broker", b.Addr}
	sluiceWant(t, 1, "", append(describe, creds...), "tls_required", "this port speaks TLS", "--tls-ca")
	other := newPKI(t, "other")
	sluiceWant(t, 1, "", append(append(describe, "--tls-ca", other.file), creds...),
		"its certificate was refused", "certificate signed by unknown authority")
	sluiceWant(t, 1, "", append(append(describe, "--tls-ca", ca.file), creds...),
		"the broker refused this client's TLS", "certificate required")
	t.Setenv("SLUICE_PASSWORD", "wrong")
	sluiceWant(t, 1, "", append([]string{"consume", "--topic", "lines", "--user", "alice"}, mtls...), "auth_failed")
	sluiceWant(t, 2, "", append(append(describe, "--tls-ca", filepath.Join(t.TempDir(), "nosuch.pem")), creds...),
		"--tls-ca", "no such file")
	if strings.Contains(b.Log(), alicePW) || strings.Contains(b.Log(), "PRIVATE KEY") {
		t.Fatal("the broker logged a secret")
	}
}
