package test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"sluice/internal/peer/hdfstest"
	"sluice/internal/peer/zktest"
	"sluice/internal/testbroker"
	"sluice/wire"
)

// ZooKeeper's troubles that a cluster must ride out (issue 13): a restart inside the
// session timeout, and one broker cut off from it while it serves on.

// TestClusterZooKeeperRestarted: ZooKeeper killed (kill -9) and started again on its data
// while a producer writes, back well inside the brokers' session timeout (10 s, the most
// zktest's server grants). The sessions survive the restart (ZooKeeper keeps them in its
// log and gives each its timeout again when it starts): the brokers keep their
// registrations and their partitions, nothing is loaded or given up again, nobody sees a
// new session, and the producer goes on. Every record it produced is read back exactly
// once, in order per key. (Down past the session: TestClusterZooKeeperDown.)
//
// ZooKeeper 3.9 accepts connections while it starts and leaves a client's connect
// request unanswered and its connection open (its close fails on a database not loaded
// yet: ZOOKEEPER-5051), and go-zookeeper waited ten times its receive timeout (6.7
// session timeouts) for that answer, so a broker that reconnected in that window lost
// its session however briefly ZooKeeper was down: this test failed that way about every
// other run. admin.Dial now cuts the handshake's deadlines to a third of the session
// (admin/dialer.go).
func TestClusterZooKeeperRestarted(t *testing.T) {
	const session = 10 * time.Second
	c := &cluster{zk: zktest.Start(t), hdfs: hdfstest.Start(t), session: session}
	c.addAdmin(t)
	c.addBroker(t)
	c.addBroker(t)
	c.createTopic(t, "zr", 4)
	addrs := []string{c.brokers[0].Addr, c.brokers[1].Addr}
	load := startIDLoad(t, "zr", addrs...)
	load.waitSent(t, "records before the restart", 2000)
	placed := fmt.Sprint(owners(t, addrs[0], "zr"))
	moves := func(b *testbroker.Broker) string {
		return fmt.Sprintf("%v loads, %v unloads", scrape(t, b.MetricsAddr, `sluice_cluster_moves_total{kind="load"}`),
			scrape(t, b.MetricsAddr, `sluice_cluster_moves_total{kind="unload"}`))
	}
	before := []string{moves(c.brokers[0]), moves(c.brokers[1])}

	down := time.Now()
	c.zk.Kill()
	c.zk.Restart(t)
	gone := time.Since(down)
	t.Logf("ZooKeeper served again %v after its kill (session timeout %v)", gone.Round(time.Millisecond), session)
	if gone >= session {
		t.Skipf("ZooKeeper took %v to start again, past the %v session: this host is too slow for what the test is about", gone, session)
	}
	// The load acknowledged as persisted from here on needs the leases renewed, on
	// ZooKeeper again.
	load.waitSent(t, "records after the restart", 2000)
	n := load.finish(t)
	for i, b := range c.brokers {
		if got := moves(b); got != before[i] {
			t.Fatalf("broker %s moved partitions across the restart: %s before, %s after\n%s", b.Addr, before[i], got, b.Log())
		}
		for _, line := range []string{"ZooKeeper session expired", "new ZooKeeper session"} {
			if strings.Contains(b.Log(), line) {
				t.Fatalf("broker %s lost its session across a restart inside it (%q):\n%s", b.Addr, line, b.Log())
			}
		}
		if lease := scrape(t, b.MetricsAddr, `sluice_cluster_lease_seconds`); lease <= 0 {
			t.Fatalf("broker %s has no lease after the restart (%v s)", b.Addr, lease)
		}
	}
	if now := fmt.Sprint(owners(t, addrs[0], "zr")); now != placed {
		t.Fatalf("the partitions moved across the restart: %s before, %s after", placed, now)
	}
	checkExactlyOnce(t, "zr", n, addrs...)
}

// TestClusterCutOffFenced: one broker cut off from ZooKeeper (a proxy in front of it
// drops its connections and refuses new ones) while it serves on, the other not. The cut
// broker's lease, renewed by ZooKeeper round trips, lapses half a session after its last
// one, and from then on it refuses produce for its partition (not_owner); its session
// expires only at the full timeout, and only then can the admin move the partition and
// the other broker load it. One client writes to the partition on both brokers in turn,
// one request at a time: the cut broker must refuse a write before the other accepts
// one, and accept none after. The measured gap, from the last write the cut broker took
// to the first the new owner took, is logged. When the proxy lets it through again, the
// cut broker hears its session expired and registers again.
func TestClusterCutOffFenced(t *testing.T) {
	c := startCluster(t, 0)
	px := startZKProxy(t, c.zk.Addr)
	cut := c.addBrokerVia(t, px.Addr())
	other := c.addBroker(t)
	c.createTopic(t, "x", 2)
	var part uint32
	for i, a := range owners(t, other.Addr, "x") {
		if a == cut.Addr {
			part = uint32(i)
		}
	}
	write := func(w *wireConn) wire.Code {
		return w.call(&wire.ProduceRequest{Topic: []byte("x"), Partition: part, Version: 1, Batches: records(0, -1, "w", 1)}).Header.Code
	}
	wCut, wOther := dial(t, cut.Addr), dial(t, other.Addr)
	waitFor(t, "the broker to be cut off to take writes", func() bool { return write(wCut) == wire.CodeNone })

	lease := scrape(t, cut.MetricsAddr, `sluice_cluster_lease_seconds`)
	start := time.Now()
	px.SetCut(true)
	lastOld := start // the last write the cut broker took (before the cut, at the latest)
	var refused, firstNew time.Time
	var refusal wire.Code
	after := 0 // rounds since the new owner took a write
	deadline := start.Add(time.Minute)
	for after < 50 {
		if time.Now().After(deadline) {
			t.Fatal("the partition did not move within a minute of the cut")
		}
		switch code := write(wCut); {
		case code == wire.CodeNone && !firstNew.IsZero():
			t.Fatalf("the cut broker took a write %v after the new owner took one", time.Since(firstNew))
		case code == wire.CodeNone:
			lastOld = time.Now()
		case refused.IsZero():
			refused, refusal = time.Now(), code
		}
		switch code := write(wOther); {
		case code == wire.CodeNone && firstNew.IsZero():
			firstNew = time.Now()
			if refused.IsZero() {
				t.Fatal("the new owner took a write before the cut broker refused one")
			}
		case !firstNew.IsZero():
			after++
		}
		time.Sleep(5 * time.Millisecond)
	}
	if refusal != wire.CodeNotOwner {
		t.Fatalf("the cut broker refused with %v, want not_owner", refusal)
	}
	t.Logf("lease left at the cut %.3f s; cut broker refused %v after the cut, last took a write %v after it; "+
		"new owner took its first %v after the cut: a gap of %v with no broker taking writes (session timeout %v)",
		lease, refused.Sub(start).Round(time.Millisecond), lastOld.Sub(start).Round(time.Millisecond),
		firstNew.Sub(start).Round(time.Millisecond), firstNew.Sub(lastOld).Round(time.Millisecond), clusterSession)

	px.SetCut(false)
	waitFor(t, "the cut broker to register again", func() bool {
		return strings.Contains(cut.Log(), "new ZooKeeper session: registering again")
	})
	if code := write(wCut); code == wire.CodeNone && owners(t, other.Addr, "x")[part] != cut.Addr {
		t.Fatal("the broker that was cut off took a write for a partition it no longer holds")
	}
}
