package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice/internal/testbroker"
)

// TestUserAndACLCommands: sluice user and sluice acl edit their files (mode 0600, no
// password in them), and refuse bad input with exit 2 before touching anything.
func TestUserAndACLCommands(t *testing.T) {
	dir := t.TempDir()
	users, acls, pwFile := filepath.Join(dir, "users"), filepath.Join(dir, "acls"), filepath.Join(dir, "pw")
	os.WriteFile(pwFile, []byte("from a file\r\nsecond line\n"), 0o600)
	exec := func(want int, stdin string, args ...string) string {
		t.Helper()
		var out, errOut strings.Builder
		if got := run(args, strings.NewReader(stdin), &out, &errOut); got != want {
			t.Fatalf("sluice %v: exit %d, want %d\n%s%s", args, got, want, out.String(), errOut.String())
		}
		return out.String() + errOut.String()
	}
	exec(0, "stdin secret\n", "user", "add", "alice", "--file", users)
	exec(0, "", "user", "add", "--file", users, "bob", "--password-file", pwFile, "--iterations", "5000")
	if out := exec(1, "x\n", "user", "add", "alice", "--file", users); !strings.Contains(out, "--replace") {
		t.Fatalf("adding alice twice: %s", out)
	}
	exec(0, "new secret\n", "user", "add", "alice", "--file", users, "--replace")
	exec(2, "", "user", "add", "carol", "--file", users)                           // no password
	exec(2, "pw\n", "user", "add", "car ol", "--file", users)                      // bad name
	exec(2, "pw\n", "user", "add", "carol", "--file", users, "--iterations", "10") // too few rounds
	exec(2, "pw\n", "user", "add", "--file", users)
	if out := exec(0, "", "user", "list", "--file", users); out != "alice\tSCRAM-SHA-256\titerations=4096\nbob\tSCRAM-SHA-256\titerations=5000\n" {
		t.Fatalf("list:\n%s", out)
	}
	raw, _ := os.ReadFile(users)
	st, _ := os.Stat(users)
	for _, secret := range []string{"stdin secret", "new secret", "from a file", "second line"} {
		if strings.Contains(string(raw), secret) {
			t.Fatalf("the users file holds %q", secret)
		}
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("users file mode %v", st.Mode())
	}
	exec(0, "", "user", "remove", "bob", "--file", users)
	exec(1, "", "user", "remove", "bob", "--file", users)

	exec(0, "", "acl", "add", "--file", acls, "--user", "alice", "--topic", "orders", "--ops", "produce,consume")
	exec(0, "", "acl", "add", "--file", acls, "--user", "alice", "--prefix", "ev.", "--ops", "consume")
	exec(0, "", "acl", "add", "--file", acls, "--user", "*", "--all", "--ops", "describe")
	exec(0, "", "acl", "add", "--file", acls, "--user", "bob", "--topic", "orders", "--ops", "describe")
	exec(2, "", "acl", "add", "--file", acls, "--user", "bob", "--topic", "orders")                                 // no --ops
	exec(2, "", "acl", "add", "--file", acls, "--user", "bob", "--topic", "o", "--prefix", "p", "--ops", "produce") // two patterns
	exec(2, "", "acl", "add", "--file", acls, "--user", "bob", "--topic", "o", "--ops", "write")
	exec(2, "", "acl", "add", "--file", acls, "--topic", "o", "--ops", "produce")
	// An empty --prefix (say, an unset shell variable) is refused, not a grant on every
	// topic: --all says that.
	exec(2, "", "acl", "add", "--file", acls, "--user", "bob", "--prefix", "", "--ops", "consume")
	exec(2, "", "acl", "remove", "--file", acls, "--user", "*", "--prefix", "")
	exec(0, "", "acl", "remove", "--file", acls, "--user", "alice", "--topic", "orders", "--ops", "consume")
	exec(1, "", "acl", "remove", "--file", acls, "--user", "alice", "--prefix", "nope")
	want := "allow alice produce orders\nallow alice consume ev.*\nallow * describe *\n"
	if out := exec(0, "", "acl", "list", "--file", acls, "--user", "alice"); out != want {
		t.Fatalf("acl list --user alice:\n%s", out)
	}
	exec(0, "", "acl", "remove", "--file", acls, "--user", "bob", "--topic", "orders")
	if out := exec(0, "", "acl", "list", "--file", acls); out != want {
		t.Fatalf("acl list:\n%s", out)
	}
}

// TestClientCommandsAuthenticate: produce, consume and topic authenticate with --user
// and --password-file or $SLUICE_PASSWORD; without credentials, or with wrong ones,
// they exit 1 with the broker's code; --user without a password is a usage error.
func TestClientCommandsAuthenticate(t *testing.T) {
	dir := t.TempDir()
	users, acls, pwFile := filepath.Join(dir, "users"), filepath.Join(dir, "acls"), filepath.Join(dir, "pw")
	os.WriteFile(pwFile, []byte("s3cret\n"), 0o600)
	mustRun(t, 0, "s3cret\n", "user", "add", "alice", "--file", users)
	mustRun(t, 0, "", "acl", "add", "--file", acls, "--user", "alice", "--all", "--ops", "admin")
	b := testbroker.Start(t, t.TempDir(), "-auth.users", users, "-auth.failure_delay", "10ms")
	creds := []string{"--broker", b.Addr, "--user", "alice", "--password-file", pwFile}
	mustRun(t, 0, "", append([]string{"topic", "create", "lines"}, creds...)...)
	mustRun(t, 0, "a\nb\n", append([]string{"produce", "--topic", "lines"}, creds...)...)
	if out := mustRun(t, 0, "", append([]string{"consume", "--topic", "lines", "--max", "2"}, creds...)...); out != "a\nb\n" {
		t.Fatalf("consume: %q", out)
	}
	t.Setenv(passwordEnv, "s3cret")
	mustRun(t, 0, "", "topic", "describe", "lines", "--broker", b.Addr, "--user", "alice")
	if _, _, errOut := sluiceCmd(t, "", "topic", "describe", "lines", "--broker", b.Addr); !strings.Contains(errOut, "auth_required") {
		t.Fatalf("without credentials: %s", errOut)
	}
	t.Setenv(passwordEnv, "wrong")
	if code, _, errOut := sluiceCmd(t, "", "consume", "--topic", "lines", "--broker", b.Addr, "--user", "alice"); code != 1 ||
		!strings.Contains(errOut, "auth_failed") {
		t.Fatalf("a wrong password: exit %d %s", code, errOut)
	}
	t.Setenv(passwordEnv, "")
	if code, _, errOut := sluiceCmd(t, "", "produce", "--topic", "lines", "--broker", b.Addr, "--user", "alice"); code != 2 ||
		!strings.Contains(errOut, "password") {
		t.Fatalf("--user without a password: exit %d %s", code, errOut)
	}
	if strings.Contains(b.Log(), "s3cret") {
		t.Fatal("the broker's log holds the password")
	}
}
