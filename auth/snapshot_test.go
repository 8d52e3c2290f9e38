package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice/auth/acl"
	"sluice/auth/scram"
)

// TestLoadAndGrants: Load reads both files (a missing ACL file is no rules); the grant
// edits add up and remove exactly what they name.
func TestLoadAndGrants(t *testing.T) {
	dir := t.TempDir()
	users, acls := filepath.Join(dir, "users"), filepath.Join(dir, "acls")
	if _, err := Load(users, acls); err == nil {
		t.Fatal("loaded without a users file")
	}
	if err := AddUser(users, "alice", "pw", scram.MinIterations, false); err != nil {
		t.Fatal(err)
	}
	snap, err := Load(users, acls)
	if err != nil || acl.Allows(snap.ACL.For("alice"), acl.Describe, "orders") {
		t.Fatalf("without an ACL file: %v", err)
	}
	prefix, _ := acl.ParsePattern("orders.*")
	for _, g := range []struct {
		ops acl.Op
		p   acl.Pattern
	}{{acl.Produce, acl.Pattern{Name: "orders"}}, {acl.Consume, acl.Pattern{Name: "orders"}}, {acl.Consume, prefix}} {
		if err := AddGrant(acls, "alice", g.ops, g.p); err != nil {
			t.Fatal(err)
		}
	}
	if err := RemoveGrant(acls, "alice", acl.Consume, acl.Pattern{Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	if err := RemoveGrant(acls, "bob", 0, prefix); !errors.Is(err, ErrNoSuchGrant) {
		t.Fatalf("removing a grant nobody has: %v", err)
	}
	snap, err = Load(users, acls)
	if err != nil {
		t.Fatal(err)
	}
	g := snap.ACL.For("alice")
	if !acl.Allows(g, acl.Produce, "orders") || acl.Allows(g, acl.Consume, "orders") || !acl.Allows(g, acl.Consume, "orders.eu") {
		t.Fatalf("rules %+v", snap.Rules)
	}
	// Readable by all is fine; writable by group or others is refused, whatever it says.
	for _, mode := range []os.FileMode{0o644, 0o664, 0o646} {
		if err := os.Chmod(acls, mode); err != nil {
			t.Fatal(err)
		}
		_, err := Load(users, acls)
		if writable := mode&0o022 != 0; (err != nil) != writable || writable && !strings.Contains(err.Error(), "chmod") {
			t.Fatalf("an ACL file of mode %v: %v", mode, err)
		}
	}
	os.Chmod(acls, 0o600)
	os.WriteFile(acls, []byte("allow alice fly orders\n"), 0o600)
	if _, err := Load(users, acls); err == nil {
		t.Fatal("a bad ACL file loaded")
	}
}
