package test

import (
	"strings"
	"testing"
)

// TestClusterExpiredBrokerNamesTheOthers: a broker whose ZooKeeper session expired gives
// its own partitions up, and until it reads the cluster again on its new session its
// metadata must still name the brokers of the others. It answered every partition of the
// cluster as moving (no address) instead, so clients that asked it kept asking again for
// as long as that reading took (one ZooKeeper read per partition: seconds for a large
// cluster). The broker is cut off from ZooKeeper by a proxy until its session expires
// and the admin moves its partition to the other broker; the failpoint expiry_reread
// (a fake: a live ZooKeeper answers the new reading in milliseconds, too soon to ask in
// between) holds that reading for 10 s after the expiry.
func TestClusterExpiredBrokerNamesTheOthers(t *testing.T) {
	c := startCluster(t, 0)
	px := startZKProxy(t, c.zk.Addr)
	cut := c.addBrokerEnv(t, px.Addr(), []string{"SLUICE_FAILPOINTS=expiry_reread=cluster"})
	other := c.addBroker(t)
	c.createTopic(t, "x", 2)
	placed := owners(t, other.Addr, "x")
	mine := 0 // the cut broker's partition
	if placed[1] == cut.Addr {
		mine = 1
	}
	if placed[mine] != cut.Addr || placed[1-mine] != other.Addr {
		t.Fatalf("placement %v, want one partition on each of %s and %s", placed, cut.Addr, other.Addr)
	}

	px.SetCut(true)
	waitFor(t, "the other broker to take the cut broker's partition", func() bool {
		return owners(t, other.Addr, "x")[mine] == other.Addr
	})
	px.SetCut(false)
	waitFor(t, "the cut broker to hear its session expired", func() bool {
		return strings.Contains(cut.Log(), "ZooKeeper session expired: giving every partition up")
	})
	// Within the failpoint's hold. The admin may have moved a partition back to the
	// broker as soon as it registered again (placement by load), and the broker may have
	// read that before it heard of the expiry: so the partitions it names may be either.
	// But one of the two is the other broker's, and the broker now serves neither.
	got := owners(t, cut.Addr, "x")
	named := 0
	for i, a := range got {
		switch a {
		case "":
		case cut.Addr:
			t.Errorf("after its session expired the broker named itself for partition %d, which it gave up (all: %v)", i, got)
		case other.Addr:
			named++
		default:
			t.Errorf("partition %d named at %q, neither broker (all: %v)", i, a, got)
		}
	}
	if named == 0 {
		t.Errorf("after its session expired the broker named no broker for any partition (%v), where the other broker %s serves one",
			got, other.Addr)
	}
}
