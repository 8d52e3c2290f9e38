package admin

import (
	"errors"
	"path"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"sluice/internal/peer/zktest"
)

// TestSecurityDigest: security znodes made or edited by a session with a digest
// credential can be read and written by sessions with it only: one without any, or with
// another, gets ErrNoAuth for reads and edits (they were open to anyone who reached
// ZooKeeper). Znodes made open before the credential was given are locked by the first
// edit with it. A session with the credential follows edits through its watch.
func TestSecurityDigest(t *testing.T) {
	s := zktest.Start(t)
	open, other := dial(t, s), dial(t, s, WithDigest(Digest{"mallory", "guess"}))
	// Made open, before the credential was given.
	if err := open.EditSecurity(ACLsZnode, appendLine("allow alice admin *")); err != nil {
		t.Fatal(err)
	}
	d := Digest{"sluice", "zk-s3cret"}
	owner, follower := dial(t, s, WithDigest(d)), dial(t, s, WithDigest(d))
	if err := owner.EditSecurity(UsersZnode, appendLine("user alice")); err != nil {
		t.Fatal(err)
	}
	if err := owner.EditSecurity(ACLsZnode, appendLine("allow bob consume orders")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		c    *Cluster
	}{{"a session without a credential", open}, {"a session with another credential", other}} {
		for _, znode := range []string{UsersZnode, ACLsZnode} {
			if _, _, _, _, err := c.c.ReadSecurity(znode); !errors.Is(err, ErrNoAuth) {
				t.Fatalf("%s reads %s: %v, want ErrNoAuth", c.name, znode, err)
			}
			if err := c.c.EditSecurity(znode, appendLine("allow mallory admin *")); !errors.Is(err, ErrNoAuth) {
				t.Fatalf("%s edits %s: %v, want ErrNoAuth", c.name, znode, err)
			}
		}
		if err := c.c.conn.Delete(path.Join("/sluice", UsersZnode), -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("%s deletes the users znode: %v, want NoAuth", c.name, err)
		}
		if _, err := c.c.conn.Create("/sluice/security/extra", nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
			t.Fatalf("%s creates a znode under /sluice/security: %v, want NoAuth", c.name, err)
		}
	}
	data, ok, _, watch, err := follower.ReadSecurity(ACLsZnode)
	if err != nil || !ok || string(data) != "allow alice admin *\nallow bob consume orders\n" {
		t.Fatalf("the credential's reader: %q %v %v", data, ok, err)
	}
	if err := owner.EditSecurity(ACLsZnode, appendLine("allow carol produce orders")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-watch:
	case <-time.After(30 * time.Second):
		t.Fatal("the credential's reader saw no change")
	}
	if _, err := ParseDigest("no colon"); err == nil {
		t.Fatal("a digest without a password parsed")
	}
	if got, err := ParseDigest("u:p:with:colons\r\nsecond line"); err != nil || got != (Digest{"u", "p:with:colons"}) {
		t.Fatalf("ParseDigest: %+v %v", got, err)
	}
}
