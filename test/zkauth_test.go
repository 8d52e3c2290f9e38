package test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"sluice/admin"
	"sluice/auth"
	"sluice/client"
	"sluice/internal/peer/hdfstest"
	"sluice/internal/peer/zktest"
	"sluice/internal/spawn"
	"sluice/internal/testbroker"
	"sluice/wire"
)

// sluiceCLI runs the sluice binary with stdin and returns its output and error.
func sluiceCLI(t testing.TB, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(testbroker.Binary(t), args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := spawn.Run(cmd) // dies with the test binary
	return out.String(), err
}

// mustCLI runs the sluice binary and fails the test unless it succeeds.
func mustCLI(t testing.TB, stdin string, args ...string) {
	t.Helper()
	if out, err := sluiceCLI(t, stdin, args...); err != nil {
		t.Fatalf("sluice %v: %v\n%s", args, err, out)
	}
}

// TestAuthFromZooKeeper: brokers with auth.source zk (docs/security.md, "Distributed
// mode"). Without a users znode a broker refuses to start. Users and grants added with
// `sluice user/acl --zk` let a client authenticate, create a topic and produce through
// two brokers; a grant removed is refused not_authorized by both brokers; content that
// does not parse keeps the last good users and grants on both (the error in the log and
// the metrics) until it is written over; a broker whose session ended follows the next
// edit; a deleted users znode leaves both with no users until it is back; no secret of
// the znode reaches a log.
func TestAuthFromZooKeeper(t *testing.T) {
	zks, h := zktest.Start(t), hdfstest.Start(t)
	zk := []string{"--zk", zks.Addr}
	// The brokers' look at the znodes is an hour away: their watches carry every change.
	brokerArgs := []string{"-metrics", "127.0.0.1:0", "-hdfs.addr", h.Addr, "-hdfs.timeout", "5s",
		"-hdfs.commit_interval", "20ms", "-zk", zks.Addr, "-zk.session_timeout", clusterSession.String(),
		"-auth.source", "zk", "-auth.failure_delay", "10ms", "-auth.reload_interval", "1h", "-log-level", "debug"}

	// No users znode: the broker refuses to start, and says why.
	out, err := sluiceCLI(t, "", append([]string{"broker", "-data", t.TempDir(), "-listen", "127.0.0.1:0"}, brokerArgs...)...)
	if err == nil || !strings.Contains(out, "/sluice/security/users") || !strings.Contains(out, "does not exist") {
		t.Fatalf("a broker started without a users znode: %v\n%s", err, out)
	}

	mustCLI(t, alicePW+"\n", append([]string{"user", "add", "alice"}, zk...)...)
	mustCLI(t, bobPW+"\n", append([]string{"user", "add", "bob"}, zk...)...)
	mustCLI(t, "", append([]string{"acl", "add", "--user", "alice", "--all", "--ops", "admin"}, zk...)...)
	mustCLI(t, "", append([]string{"acl", "add", "--user", "bob", "--topic", "orders", "--ops", "produce"}, zk...)...)
	startAdmin(t, zks.Addr, "a1")
	b1 := testbroker.Start(t, t.TempDir(), brokerArgs...)
	b2 := testbroker.Start(t, t.TempDir(), brokerArgs...)
	brokers := []*testbroker.Broker{b1, b2}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	as := func(user, pw string) []client.Opt {
		return []client.Opt{client.Brokers(b1.Addr, b2.Addr), client.Auth(user, pw)}
	}
	a, err := client.NewAdmin(as("alice", alicePW)...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.CreateTopic(ctx, "orders", 2, wire.TopicOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := client.NewProducer(ctx, "orders", as("bob", bobPW)...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	for i := range 20 { // both partitions, so through both brokers once placed
		if _, err := p.ProduceSync(ctx, &client.Record{Key: []byte{byte(i)}, Value: []byte("v")}, client.AckPersisted); err != nil {
			t.Fatal(err)
		}
	}

	// One edit, followed by both brokers.
	describe := func(b *testbroker.Broker, user, pw string) wire.Code {
		w := dial(t, b.Addr).login(user, pw)
		defer w.conn.Close()
		return w.call(&wire.DescribeTopicRequest{Name: "orders"}).Header.Code
	}
	mustCLI(t, "", append([]string{"acl", "remove", "--user", "bob", "--topic", "orders"}, zk...)...)
	for _, b := range brokers {
		waitFor(t, "the grant's removal on "+b.Addr, func() bool { return describe(b, "bob", bobPW) == wire.CodeNotAuthorized })
	}
	if _, err := p.ProduceSync(ctx, &client.Record{Value: []byte("v")}, client.AckPersisted); !errors.Is(err, client.ErrNotAuthorized) {
		t.Fatalf("produce after the grant's removal: %v", err)
	}

	// Content that does not parse: the last good snapshot stays on both, and says so.
	c, err := admin.Dial(ctx, []string{zks.Addr}, "/sluice", 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.EditSecurity(admin.ACLsZnode, func([]byte, bool) ([]byte, error) {
		return []byte("allow alice admin *\ngrant everything to everyone\n"), nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, b := range brokers {
		waitFor(t, "the failed reload on "+b.Addr, func() bool {
			return testbroker.Scrape(t, b.MetricsAddr, "sluice_auth_reload_failing") == 1 &&
				testbroker.Scrape(t, b.MetricsAddr, `sluice_auth_reloads_total{result="failed"}`) >= 1
		})
		if !strings.Contains(b.Log(), "users/ACL reload failed") {
			t.Fatalf("%s logged no error for the bad content:\n%s", b.Addr, b.Log())
		}
		if got := describe(b, "alice", alicePW); got != wire.CodeNone {
			t.Fatalf("alice's grant under the last good snapshot: %v", got)
		}
		if got := describe(b, "bob", bobPW); got != wire.CodeNotAuthorized {
			t.Fatalf("bob under the last good snapshot: %v", got)
		}
	}
	// Written over with good content (and a grant back): both follow again.
	f := newAuthFiles(t, map[string]string{}, "allow alice admin *\nallow bob describe orders\n")
	mustCLI(t, "", append([]string{"acl", "import", f.acls}, zk...)...)
	for _, b := range brokers {
		waitFor(t, "the repaired content on "+b.Addr, func() bool {
			return describe(b, "bob", bobPW) == wire.CodeNone && testbroker.Scrape(t, b.MetricsAddr, "sluice_auth_reload_failing") == 0
		})
	}

	// A session's end takes its watches along: a broker paused past its session follows
	// the next edit through the watches its new session's read leaves.
	resume := pause(t, b2)
	live := func(n int) func() bool {
		return func() bool { bs, err := c.Brokers(); return err == nil && len(bs) == n }
	}
	waitFor(t, "the paused broker's session to end", live(1))
	resume()
	waitFor(t, "the paused broker registered again", live(2))
	mustCLI(t, "", append([]string{"acl", "remove", "--user", "bob", "--topic", "orders"}, zk...)...)
	for _, b := range brokers {
		waitFor(t, "the edit after a new session on "+b.Addr, func() bool { return describe(b, "bob", bobPW) == wire.CodeNotAuthorized })
	}

	// The users znode deleted: both brokers serve no users (fail closed), an open
	// connection is unauthenticated at its next request; users added again are followed.
	bobConn := dial(t, b1.Addr).login("bob", bobPW)
	before, _, _, _, err := c.ReadSecurity(admin.UsersZnode)
	if err != nil {
		t.Fatal(err)
	}
	zks.Delete(t, "/sluice/security/users")
	for _, b := range brokers {
		waitFor(t, "no users on "+b.Addr, func() bool { return testbroker.Scrape(t, b.MetricsAddr, "sluice_auth_users") == 0 })
		w := dial(t, b.Addr)
		wantCode(t, w.authenticate("alice", alicePW), wire.CodeAuthFailed)
		w.conn.Close()
		if !strings.Contains(b.Log(), "THE USERS ZNODE WAS DELETED") {
			t.Fatalf("%s did not log the deletion loudly", b.Addr)
		}
	}
	wantCode(t, bobConn.call(&wire.DescribeTopicRequest{Name: "orders"}), wire.CodeAuthRequired)
	mustCLI(t, alicePW+"\n", append([]string{"user", "add", "alice"}, zk...)...)
	for _, b := range brokers {
		waitFor(t, "alice back on "+b.Addr, func() bool { return describe(b, "alice", alicePW) == wire.CodeNone })
	}

	// No secret of the users znode in any log (passwords never reach the broker).
	after, _, _, _, err := c.ReadSecurity(admin.UsersZnode)
	if err != nil {
		t.Fatal(err)
	}
	for _, users := range [][]byte{before, after} {
		if _, err := auth.ParseUsers(users); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(users), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || f[0] == "#" {
				continue
			}
			for _, secret := range f[len(f)-min(len(f)-1, 3):] { // the key; salt, StoredKey, ServerKey
				for _, b := range brokers {
					if len(secret) > 8 && strings.Contains(b.Log(), secret) {
						t.Fatalf("%s logged a value of the users znode", b.Addr)
					}
				}
			}
		}
	}
	for _, b := range brokers {
		for _, pw := range []string{alicePW, bobPW} {
			if strings.Contains(b.Log(), pw) {
				t.Fatalf("%s logged a password", b.Addr)
			}
		}
	}
}
