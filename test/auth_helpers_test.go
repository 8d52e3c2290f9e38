package test

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sluice/auth"
	"sluice/auth/acl"
	"sluice/auth/scram"
	"sluice/broker"
	"sluice/persist/vfs"
	"sluice/wire"
)

// authFiles are a users file and an ACL file in a test directory.
type authFiles struct {
	t           testing.TB
	users, acls string
	passwords   map[string]string
}

// newAuthFiles writes a users file with each user of passwords and an ACL file with
// grants (acl file lines).
func newAuthFiles(t testing.TB, passwords map[string]string, grants string) *authFiles {
	t.Helper()
	dir := t.TempDir()
	f := &authFiles{t: t, users: filepath.Join(dir, "users"), acls: filepath.Join(dir, "acls"), passwords: passwords}
	for user, pw := range passwords {
		f.addUser(user, pw)
	}
	if err := os.WriteFile(f.acls, []byte(grants), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *authFiles) addUser(user, password string) {
	f.t.Helper()
	if err := auth.AddUser(f.users, user, password, scram.MinIterations, false); err != nil {
		f.t.Fatal(err)
	}
	f.passwords[user] = password
}

func (f *authFiles) grant(user string, ops acl.Op, pattern string) {
	f.t.Helper()
	p, err := acl.ParsePattern(pattern)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := auth.AddGrant(f.acls, user, ops, p); err != nil {
		f.t.Fatal(err)
	}
}

// startAuthBroker starts an in-process broker with authentication on these files, a
// failure delay of delay and a reload interval of 50 ms, logging at debug level into the
// returned buffer (so a test can look for secrets in everything it says).
func startAuthBroker(t *testing.T, f *authFiles, delay time.Duration) (*broker.Broker, *syncBuf) {
	t.Helper()
	logs := &syncBuf{}
	b, _ := startInProcessAt(t, t.TempDir(), vfs.Default(), 1<<20, func(c *broker.Config) {
		c.Auth = broker.AuthConfig{UsersFile: f.users, ACLFile: f.acls, FailureDelay: delay,
			ReloadInterval: 50 * time.Millisecond}
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	return b, logs
}

// authenticate runs a SCRAM exchange on w and returns the final answer (code and text);
// on success it also checks the broker's signature.
func (w *wireConn) authenticate(user, password string) *wire.Response {
	w.t.Helper()
	c, err := scram.NewClient(user, password)
	if err != nil {
		w.t.Fatal(err)
	}
	r := w.call(&wire.AuthenticateRequest{Mechanism: wire.MechanismSCRAMSHA256, Payload: c.First()})
	mustOK(w.t, r)
	final, err := c.Final(r.Body.(*wire.AuthenticateResponse).Payload)
	if err != nil {
		w.t.Fatal(err)
	}
	r = w.call(&wire.AuthenticateRequest{Mechanism: wire.MechanismSCRAMSHA256, Payload: final})
	if r.Header.Code == wire.CodeNone {
		if err := c.Verify(r.Body.(*wire.AuthenticateResponse).Payload); err != nil {
			w.t.Fatalf("the broker's signature: %v", err)
		}
	}
	return r
}

// login authenticates w and fails the test unless it passes.
func (w *wireConn) login(user, password string) *wireConn {
	w.t.Helper()
	mustOK(w.t, w.authenticate(user, password))
	return w
}

// wantCode fails the test unless resp has code c.
func wantCode(t testing.TB, resp *wire.Response, c wire.Code) {
	t.Helper()
	if resp.Header.Code != c {
		t.Fatalf("%v: %v %q, want %v", resp.Header.APIKey, resp.Header.Code, resp.Text, c)
	}
}

func removeUser(path, user string) error { return auth.RemoveUser(path, user) }

// writeFile replaces a file's content in place (mode 0600).
func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// addUserReplacing gives an existing user a new password.
func (f *authFiles) addUserReplacing(user, password string) {
	f.t.Helper()
	if err := auth.AddUser(f.users, user, password, scram.MinIterations, true); err != nil {
		f.t.Fatal(err)
	}
	f.passwords[user] = password
}
