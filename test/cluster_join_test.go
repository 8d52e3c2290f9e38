package test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"sluice/admin"
	"sluice/internal/testbroker"
	"sluice/wire"
)

// TestClusterJoinDuringRebalance: two brokers serve a topic of 12 partitions under a
// producer's load; a third joins and the admin moves four partitions to it, and while
// none of those moves has finished a fourth joins, so the admin places again over
// assignments still waiting (some partitions move on from the third broker before it
// ever loaded them, and the fourth must wait for the third's release, not the first
// owner's). The third broker is paused (SIGSTOP) from its registration until the fourth
// has its share, and the admin while the third starts, so that the moves are under way
// when the fourth joins, whatever the host's speed. In the end every partition is
// served by exactly one broker, spread three a broker, the producer has gone on through
// it all, and every record it produced is read back exactly once, in order per key.
func TestClusterJoinDuringRebalance(t *testing.T) {
	const parts = 12
	// A session that outlasts the third broker's pause (its partitions are not its yet:
	// the pause must not end its session too, which another test covers).
	c := startClusterSession(t, 2, 10*time.Second)
	c.createTopic(t, "r", parts)
	zc := dialZK(t, c)
	load := startIDLoad(t, "r", c.brokers[0].Addr, c.brokers[1].Addr)
	load.waitSent(t, "records before the joins", 2000)

	resumeAdmin := pausePid(t, c.admins[0].Process.Pid)
	b3 := c.addBroker(t)
	resume3 := pause(t, b3) // registered: the admin finds it when it resumes
	resumeAdmin()
	waitFor(t, "the admin to move four partitions to the third broker", func() bool {
		return placedOn(t, zc, "r", parts)[b3.Addr] == 4
	})
	if strings.Contains(b3.Log(), "msg=loaded") {
		t.Fatalf("the paused broker loaded a partition:\n%s", b3.Log())
	}
	pending := movesTo(t, zc, "r", parts, b3.Addr)

	b4 := c.addBroker(t)
	waitFor(t, "the admin to give the fourth broker its share", func() bool {
		return placedOn(t, zc, "r", parts)[b4.Addr] == 3
	})
	for pid, o := range ownersOf(t, zc, "r", parts) {
		if _, ok := pending[pid]; ok && o.Broker == b4.Addr {
			t.Logf("partition %d moved on to the fourth broker from %s before the third loaded it (from %q)", pid.ID, b3.Addr, o.From)
		}
	}
	resume3()

	all := []*testbroker.Broker{c.brokers[0], c.brokers[1], b3, b4}
	waitSpread(t, "r", parts, all)
	checkPlacedOnce(t, "r", parts, all)
	load.waitSent(t, "records after the moves", 2000)
	checkExactlyOnce(t, "r", load.finish(t), addrsOf(all)...)
}

// dialZK opens a ZooKeeper session of the test's own on the cluster's state, closed when
// the test ends.
func dialZK(t testing.TB, c *cluster) *admin.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	zc, err := admin.Dial(ctx, []string{c.zk.Addr}, "/sluice", 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zc.Close)
	return zc
}

// ownersOf returns the assignments of a topic's n partitions, as ZooKeeper holds them.
func ownersOf(t testing.TB, zc *admin.Cluster, topic string, n int) map[admin.PartitionID]admin.Owned {
	t.Helper()
	all, err := zc.Owners()
	if err != nil {
		t.Fatal(err)
	}
	out := map[admin.PartitionID]admin.Owned{}
	for i := range n {
		if o, ok := all[admin.PartitionID{Topic: topic, ID: i}]; ok {
			out[admin.PartitionID{Topic: topic, ID: i}] = o
		}
	}
	return out
}

// movesTo returns the partitions assigned to broker that move from another (From set).
func movesTo(t testing.TB, zc *admin.Cluster, topic string, n int, broker string) map[admin.PartitionID]admin.Owned {
	t.Helper()
	out := map[admin.PartitionID]admin.Owned{}
	for pid, o := range ownersOf(t, zc, topic, n) {
		if o.Broker == broker && o.From != "" && o.From != broker {
			out[pid] = o
		}
	}
	if len(out) == 0 {
		t.Fatalf("no partition of %s moves to %s", topic, broker)
	}
	return out
}

// checkPlacedOnce checks that each of a topic's partitions takes writes on exactly one
// of brokers, the one every broker's metadata names, and that the others refuse them
// (not_owner). The records it writes are not produceIDs' (checkExactlyOnce counts them
// apart).
func checkPlacedOnce(t testing.TB, topic string, parts int, brokers []*testbroker.Broker) {
	t.Helper()
	names := owners(t, brokers[0].Addr, topic)
	for _, b := range brokers[1:] {
		waitFor(t, "the brokers' metadata to agree", func() bool {
			return fmt.Sprint(owners(t, b.Addr, topic)) == fmt.Sprint(names)
		})
	}
	conns := map[string]*wireConn{}
	for _, b := range brokers {
		conns[b.Addr] = dial(t, b.Addr)
	}
	for i := range uint32(parts) {
		owner := names[i]
		if conns[owner] == nil {
			t.Fatalf("partition %d of %s is on %q, not on a live broker of %v", i, topic, owner, names)
		}
		write := func(w *wireConn) wire.Code {
			return w.call(&wire.ProduceRequest{Topic: []byte(topic), Partition: i, Version: 1,
				Batches: records(0, -1, "placed", 1)}).Header.Code
		}
		waitFor(t, fmt.Sprintf("partition %d to take writes on its broker", i), func() bool {
			return write(conns[owner]) == wire.CodeNone
		})
		for addr, w := range conns {
			if code := write(w); addr != owner && code != wire.CodeNotOwner {
				t.Fatalf("partition %d of %s, served by %s, answered %v on %s", i, topic, owner, code, addr)
			}
		}
	}
}
