package auth

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice/auth/scram"
)

// exchange runs a whole SCRAM exchange against users and returns the server's answers
// and the server's and the client's errors.
func exchange(t *testing.T, u *Users, user, password string) (answers []string, serverErr, clientErr error) {
	t.Helper()
	s := scram.NewServer(u.Lookup, u.Fake)
	c, err := scram.NewClient(user, password)
	if err != nil {
		t.Fatal(err)
	}
	first, _, err := s.Step(c.First())
	if err != nil {
		t.Fatal(err)
	}
	final, err := c.Final(first)
	if err != nil {
		t.Fatal(err)
	}
	last, _, serr := s.Step(final)
	return []string{first, last}, serr, c.Verify(last)
}

// TestUsersExchange: a user written to the file authenticates with its password after a
// round trip through the file; a wrong password and an unknown user fail alike, and
// the unknown user is answered the usual iteration count and a salt that is the same
// each time it asks.
func TestUsersExchange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users")
	for _, name := range []string{"alice", "bob@example.com"} {
		if err := AddUser(path, name, "pw-"+name, 5000, false); err != nil {
			t.Fatal(err)
		}
	}
	u, err := ReadUsers(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, se, ce := exchange(t, u, "alice", "pw-alice"); se != nil || ce != nil {
		t.Fatalf("right password: %v %v", se, ce)
	}
	wrong, _, _ := exchange(t, u, "alice", "nope")
	unknown, se, ce := exchange(t, u, "mallory", "pw-alice")
	if !errors.Is(se, scram.ErrAuth) || !errors.Is(ce, scram.ErrAuth) || wrong[1] != unknown[1] {
		t.Fatalf("unknown user: %v %v, final %q vs %q", se, ce, unknown[1], wrong[1])
	}
	if !strings.HasSuffix(unknown[0], ",i=5000") {
		t.Fatalf("unknown user's server-first %q: not the users' iteration count", unknown[0])
	}
	if a, b := u.Fake("mallory"), u.Fake("mallory"); !bytes.Equal(a.Salt, b.Salt) || bytes.Equal(a.Salt, u.Fake("eve").Salt) {
		t.Fatal("fake salts are not stable per name, or are the same for two names")
	}
	again, _ := ReadUsers(path)
	if !bytes.Equal(again.Fake("mallory").Salt, u.Fake("mallory").Salt) {
		t.Fatal("the fake salt changed between two reads of the same file")
	}
}

// TestUsersFile: the file round-trips, is written mode 0600, holds no password, and a
// group- or world-readable one is refused.
func TestUsersFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "users")
	if err := AddUser(path, "alice", "correct horse", scram.MinIterations, false); err != nil {
		t.Fatal(err)
	}
	if err := AddUser(path, "alice", "other", scram.MinIterations, false); !errors.Is(err, ErrUserExists) {
		t.Fatalf("second add: %v", err)
	}
	if err := AddUser(path, "carol", "x", scram.MinIterations, false); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 || bytes.Contains(raw, []byte("correct horse")) {
		t.Fatalf("mode %v, file:\n%s", st.Mode(), raw)
	}
	u, err := ParseUsers(raw)
	if err != nil || !bytes.Equal(u.Format(), raw) {
		t.Fatalf("round trip: %v\n%s", err, u.Format())
	}
	if names := u.Names(); len(names) != 2 || names[0] != "alice" || names[1] != "carol" {
		t.Fatalf("names %v", names)
	}
	if err := RemoveUser(path, "carol"); err != nil {
		t.Fatal(err)
	}
	if err := RemoveUser(path, "carol"); !errors.Is(err, ErrNoSuchUser) {
		t.Fatalf("second remove: %v", err)
	}
	os.Chmod(path, 0o640)
	if _, err := Load(path, filepath.Join(dir, "acls")); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("group-readable users file: %v", err)
	}
}

// TestParseUsersErrors: bad lines are refused with their number and field, and the
// error never quotes a value.
func TestParseUsersErrors(t *testing.T) {
	c, _ := scram.DeriveWithSalt("pw", []byte("saltsalt"), scram.MinIterations)
	enc := base64.StdEncoding.EncodeToString
	good := []string{"alice", "SCRAM-SHA-256", "4096", enc(c.Salt), enc(c.StoredKey), enc(c.ServerKey)}
	with := func(i int, v string) string {
		f := append([]string(nil), good...)
		f[i] = v
		return "user " + strings.Join(f, " ")
	}
	secret := enc([]byte("0123456789abcdef0123456789abcdef0"))
	for _, line := range []string{
		with(0, "al ice"), with(0, "al,ice"), with(1, "PLAIN"), with(2, "100"), with(2, "x"),
		with(2, "99999999"), with(3, "!!"), with(3, enc([]byte("short"))), with(4, secret), with(5, "#"),
		"user alice", "key " + secret, "key AAAA", "nobody here",
	} {
		_, err := ParseUsers([]byte("# c\n" + with(0, "bob") + "\n" + line + "\n"))
		if err == nil || !strings.Contains(err.Error(), "line 3") || strings.Contains(err.Error(), secret) ||
			strings.Contains(err.Error(), good[4]) {
			t.Errorf("%q: %v", line, err)
		}
	}
	if _, err := ParseUsers([]byte(with(0, "bob") + "\n" + with(0, "bob") + "\n")); err == nil {
		t.Fatal("a user twice")
	}
	if _, err := ParseUsers([]byte("user " + strings.Join(good, " ") + "\n")); err != nil {
		t.Fatalf("a file without a key line: %v", err)
	}
}

// TestCheckUserName: the names users may have.
func TestCheckUserName(t *testing.T) {
	for _, ok := range []string{"a", "alice", "bob@example.com", "svc.orders-1_x", strings.Repeat("u", 255)} {
		if err := CheckUserName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a b", "a,b", "a=b", "a:b", "é", "*", strings.Repeat("u", 256)} {
		if CheckUserName(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzParseUsers: any file is parsed or refused, never a panic; what parses formats
// to a file that parses to the same users.
func FuzzParseUsers(f *testing.F) {
	u, _ := NewUsers()
	c, _ := scram.DeriveWithSalt("pw", []byte("saltsalt"), scram.MinIterations)
	u.Set("alice", c)
	f.Add(u.Format())
	f.Add([]byte("key AAAA\nuser a SCRAM-SHA-256 4096 x y z\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		u, err := ParseUsers(data)
		if err != nil {
			return
		}
		again, err := ParseUsers(u.Format())
		if err != nil || !bytes.Equal(again.Format(), u.Format()) {
			t.Fatalf("formatted users do not parse back: %v", err)
		}
		u.Fake("x")
	})
}
