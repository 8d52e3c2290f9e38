package test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sluice/admin"
	"sluice/internal/peer/zktest"
	"sluice/internal/spawn"
	"sluice/internal/testbroker"
)

// startAdmin runs `sluice admin` against ZooKeeper at addr, with a 2 s session; it is
// killed by pid when the test ends.
func startAdmin(t testing.TB, addr, id string) (*exec.Cmd, *syncBuf) {
	t.Helper()
	cmds, logs := startAdmins(t, addr, 2*time.Second, id)
	return cmds[0], logs[0]
}

// startAdmins runs one `sluice admin` per id against ZooKeeper at addr, all started at
// the same instant: each goroutine waits at a barrier, then starts its process. They are
// killed by pid when the test ends.
func startAdmins(t testing.TB, addr string, session time.Duration, ids ...string) ([]*exec.Cmd, []*syncBuf) {
	t.Helper()
	cmds, logs := make([]*exec.Cmd, len(ids)), make([]*syncBuf, len(ids))
	for i, id := range ids {
		logs[i] = &syncBuf{}
		cmds[i] = exec.Command(testbroker.Binary(t), "admin", "-zk", addr, "-id", id, "-zk-session-timeout", session.String(),
			"-interval", "100ms", "-metrics", "127.0.0.1:0")
		cmds[i].Stdout, cmds[i].Stderr = logs[i], logs[i]
	}
	barrier := make(chan struct{})
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, cmd := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-barrier
			errs[i] = spawn.Start(cmd) // dies with the test binary
		}()
	}
	close(barrier)
	wg.Wait()
	for i, cmd := range cmds {
		if errs[i] != nil {
			continue
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		t.Cleanup(func() {
			cmd.Process.Kill()
			<-done
		})
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return cmds, logs
}

// TestAdminFailover: two `sluice admin` processes; one leads and places a topic over the
// registered brokers; kill -9 of it makes the other lead, and it places what changes
// next (a broker that joins gets its share).
func TestAdminFailover(t *testing.T) {
	s := zktest.Start(t)
	c := brokerWithTopic(t, s.Addr, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first, firstLog := startAdmin(t, s.Addr, "a1")
	waitFor(t, "a1 to lead", func() bool { return strings.Contains(firstLog.String(), "admin leading") })
	_, secondLog := startAdmin(t, s.Addr, "a2")
	waitFor(t, "a2 to stand by", func() bool { return strings.Contains(secondLog.String(), "admin standing by") })
	waitFor(t, "the topic placed on b1", func() bool { return placedOn(t, c, "t", 4)["b1"] == 4 })
	if strings.Contains(secondLog.String(), "admin leading") {
		t.Fatal("two admins lead at once")
	}
	if m := adminMetrics(t, firstLog); testbroker.Scrape(t, m, "sluice_admin_leading") != 1 ||
		testbroker.Scrape(t, m, "sluice_admin_moves_total") < 4 || testbroker.Scrape(t, m, "sluice_admin_brokers") != 1 {
		t.Fatal("the leader's figures do not show it leading, with its 4 placements and 1 broker")
	}
	if m := adminMetrics(t, secondLog); testbroker.Scrape(t, m, "sluice_admin_leading") != 0 {
		t.Fatal("the admin standing by says it leads")
	}
	first.Process.Kill()
	waitFor(t, "a2 to lead after a1 died", func() bool { return strings.Contains(secondLog.String(), "admin leading") })
	b2, err := admin.Dial(ctx, []string{s.Addr}, "/sluice", 2*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if err := b2.Register(admin.BrokerInfo{ID: "b2", Addr: "127.0.0.1:2", Capacity: 1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b2 to get its share from the new leader", func() bool {
		m := placedOn(t, c, "t", 4)
		return m["b1"] == 2 && m["b2"] == 2
	})
	// The operator's view: both brokers, each partition's owner.
	out, err := exec.Command(testbroker.Binary(t), "cluster", "status", "-zk", s.Addr).CombinedOutput()
	if err != nil {
		t.Fatalf("cluster status: %v\n%s", err, out)
	}
	lines := map[string]bool{}
	parts := 0
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		lines[strings.Join(f, " ")] = true
		if len(f) == 6 && f[0] == "t" && (f[2] == "b1" || f[2] == "b2") {
			parts++
		}
	}
	if !lines["b1 127.0.0.1:1 1 0 2"] || !lines["b2 127.0.0.1:2 1 0 2"] || parts != 4 {
		t.Fatalf("cluster status does not show both brokers with 2 partitions each and the topic's 4 partitions:\n%s", out)
	}
}

// placedOn counts the assignments of a topic's n partitions per broker id, as
// ZooKeeper holds them.
func placedOn(t testing.TB, c *admin.Cluster, topic string, n int) map[string]int {
	t.Helper()
	owners, err := c.Owners()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int{}
	for i := range n {
		if o, ok := owners[admin.PartitionID{Topic: topic, ID: i}]; ok {
			m[o.Broker]++
		}
	}
	return m
}

// waitFor polls ok for up to a minute.
func waitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// adminMetrics returns the metrics address an admin logged.
func adminMetrics(t testing.TB, log *syncBuf) string {
	t.Helper()
	var addr string
	waitFor(t, "the admin's metrics address", func() bool {
		_, rest, ok := strings.Cut(log.String(), `msg="serving metrics" addr=`)
		if f := strings.Fields(rest); ok && len(f) > 0 {
			addr = f[0]
		}
		return addr != ""
	})
	return strings.TrimSpace(addr)
}

// TestAdminOutlivesZooKeeper: ZooKeeper killed for longer than the admin's session and
// started again on its data: the admin keeps running (it used to exit, leaving the
// cluster with nobody to place partitions), stands by on a new session, leads again and
// places a topic created afterwards.
func TestAdminOutlivesZooKeeper(t *testing.T) {
	s := zktest.Start(t)
	cmd, log := startAdmin(t, s.Addr, "a1")
	waitFor(t, "a1 to lead", func() bool { return strings.Contains(log.String(), "admin leading") })
	s.Kill()
	time.Sleep(3 * time.Second) // past the admin's 2 s session
	s.Restart(t)
	c := brokerWithTopic(t, s.Addr, 2)
	waitFor(t, "the topic placed by the admin after ZooKeeper came back", func() bool { return placedOn(t, c, "t", 2)["b1"] == 2 })
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the admin exited: %v\n%s", err, log.String())
	}
	if n := strings.Count(log.String(), "admin leading"); n < 2 {
		t.Fatalf("the admin led %d times, want again after ZooKeeper's return:\n%s", n, log.String())
	}
}

// brokerWithTopic registers a broker b1 (a session of the test's own, closed when the
// test ends) and creates topic t with n partitions.
func brokerWithTopic(t *testing.T, zkAddr string, n int) *admin.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := admin.Dial(ctx, []string{zkAddr}, "/sluice", 2*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.Register(admin.BrokerInfo{ID: "b1", Addr: "127.0.0.1:1", Capacity: 1}); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateTopic("t", admin.TopicInfo{Partitions: n, Version: 1}); err != nil {
		t.Fatal(err)
	}
	return c
}
