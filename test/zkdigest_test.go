package test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sluice/admin"
	"sluice/client"
	"sluice/internal/peer/hdfstest"
	"sluice/internal/peer/zktest"
	"sluice/internal/testbroker"
	"sluice/wire"
)

// TestZooKeeperDigest: with a ZooKeeper digest credential (zk.auth, --zk-auth), `sluice
// user/acl` write the security znodes readable and writable by that credential alone.
// Without it, the commands and a session of the test's own are refused (NoAuth) reading
// or editing them, and a broker with auth.source zk does not start; with it, a broker
// starts, serves the users, and follows an edit. A credential file others may read is
// refused. Before, anyone who reached ZooKeeper read the verifiers and granted
// themselves anything.
func TestZooKeeperDigest(t *testing.T) {
	zks, h := zktest.Start(t), hdfstest.Start(t)
	dir := t.TempDir()
	cred := filepath.Join(dir, "zk-auth")
	if err := os.WriteFile(cred, []byte("sluice:zk-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	zk := []string{"--zk", zks.Addr}
	withCred := append(zk[:len(zk):len(zk)], "--zk-auth", cred)
	sluiceWant(t, 0, alicePW+"\n", append([]string{"user", "add", "alice"}, withCred...))
	sluiceWant(t, 0, "", append([]string{"acl", "add", "--user", "alice", "--all", "--ops", "admin"}, withCred...))

	// Without the credential: refused, saying what is missing.
	sluiceWant(t, 1, "", append([]string{"user", "list"}, zk...), "not authenticated", "--zk-auth")
	sluiceWant(t, 1, "", append([]string{"acl", "add", "--user", "mallory", "--all", "--ops", "admin"}, zk...), "not authenticated")
	sluiceWant(t, 1, "mallory-pw\n", append([]string{"user", "add", "mallory"}, zk...), "not authenticated")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	open, err := admin.Dial(ctx, []string{zks.Addr}, "/sluice", 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	for _, znode := range []string{admin.UsersZnode, admin.ACLsZnode} {
		if _, _, _, _, err := open.ReadSecurity(znode); !errors.Is(err, admin.ErrNoAuth) {
			t.Fatalf("reading %s without the credential: %v", znode, err)
		}
		if err := open.EditSecurity(znode, func([]byte, bool) ([]byte, error) { return nil, nil }); !errors.Is(err, admin.ErrNoAuth) {
			t.Fatalf("emptying %s without the credential: %v", znode, err)
		}
	}

	startAdmin(t, zks.Addr, "a1")
	brokerArgs := []string{"-hdfs.addr", h.Addr, "-hdfs.timeout", "5s", "-zk", zks.Addr, "-zk.session_timeout",
		clusterSession.String(), "-auth.source", "zk", "-auth.failure_delay", "10ms", "-auth.reload_interval", "1h"}
	broker := append([]string{"broker", "-data", t.TempDir(), "-listen", "127.0.0.1:0"}, brokerArgs...)
	sluiceWant(t, 1, "", broker, "/sluice/security/users", "not authenticated", "zk.auth")
	if err := os.Chmod(cred, 0o640); err != nil {
		t.Fatal(err)
	}
	sluiceWant(t, 2, "", append(broker, "-zk.auth", cred), "chmod 600")
	if err := os.Chmod(cred, 0o600); err != nil {
		t.Fatal(err)
	}

	b := testbroker.Start(t, t.TempDir(), append(brokerArgs, "-zk.auth", cred)...)
	a, err := client.NewAdmin(client.Brokers(b.Addr), client.Auth("alice", alicePW))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.CreateTopic(ctx, "orders", 1, wire.TopicOptions{}); err != nil {
		t.Fatal(err)
	}
	sluiceWant(t, 0, bobPW+"\n", append([]string{"user", "add", "bob"}, withCred...))
	sluiceWant(t, 0, "", append([]string{"acl", "add", "--user", "bob", "--topic", "orders", "--ops", "describe"}, withCred...))
	waitFor(t, "the broker to follow the edit", func() bool {
		w := dial(t, b.Addr)
		defer w.conn.Close()
		if w.authenticate("bob", bobPW).Header.Code != wire.CodeNone {
			return false
		}
		return w.call(&wire.DescribeTopicRequest{Name: "orders"}).Header.Code == wire.CodeNone
	})
	if out := sluiceWant(t, 0, "", append([]string{"user", "list"}, withCred...)); out != "alice\tSCRAM-SHA-256\titerations=4096\nbob\tSCRAM-SHA-256\titerations=4096\n" {
		t.Fatalf("user list with the credential:\n%s", out)
	}
	if strings.Contains(b.Log(), "zk-s3cret") {
		t.Fatal("the broker logged the ZooKeeper password")
	}
}
