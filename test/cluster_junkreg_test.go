package test

import (
	"context"
	"strings"
	"testing"
	"time"

	"sluice/admin"
	"sluice/client"
	"sluice/internal/testbroker"
)

// TestClusterJunkRegistration: a live broker's registration znode edited by hand into
// junk while a producer writes. The admin logs a clear error naming the znode and keeps
// the broker as it last read it: no partition moves (the admin's moves stay as they
// were, every assignment keeps its broker and epoch), until the broker writes its
// registration again (every 5 s). Every record acknowledged as persisted is read back
// exactly once, in order per key. Before, the admin took the broker for dead and moved
// its partitions at once, without the new owner waiting for its release: two writers.
func TestClusterJunkRegistration(t *testing.T) {
	c := startCluster(t, 2)
	c.createTopic(t, "r", 4)
	addrs := []string{c.brokers[0].Addr, c.brokers[1].Addr}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := client.NewProducer(ctx, "r", client.Brokers(addrs...), client.Linger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	produceIDs(t, p, 0, 1500)
	zc, err := admin.Dial(ctx, []string{c.zk.Addr}, "/sluice", 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer zc.Close()
	before, err := zc.Owners()
	if err != nil {
		t.Fatal(err)
	}
	metrics := adminMetrics(t, c.logs[0])
	moves := testbroker.Scrape(t, metrics, "sluice_admin_moves_total")

	load := make(chan error, 1)
	go func() { load <- tryProduceIDs(p, 1500, 4500) }()
	// The broker ids are their addresses.
	znode := "/sluice/brokers/" + addrs[1]
	if err := zc.WriteRaw(strings.TrimPrefix(znode, "/sluice/"), []byte("{junk")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the admin to log the junk registration", func() bool {
		l := c.logs[0].String()
		return strings.Contains(l, "unreadable broker registration") && strings.Contains(l, addrs[1])
	})
	passes := testbroker.Scrape(t, metrics, "sluice_admin_passes_total")
	waitFor(t, "the admin to run more passes", func() bool {
		return testbroker.Scrape(t, metrics, "sluice_admin_passes_total") >= passes+3
	})
	if err := <-load; err != nil {
		t.Fatal(err)
	}
	after, err := zc.Owners()
	if err != nil {
		t.Fatal(err)
	}
	for pid, o := range before {
		if after[pid].Owner != o.Owner {
			t.Fatalf("%v moved for a junk registration of a live broker: %+v, then %+v", pid, o.Owner, after[pid].Owner)
		}
	}
	if m := testbroker.Scrape(t, metrics, "sluice_admin_moves_total"); m != moves {
		t.Fatalf("the admin made %v moves for a junk registration of a live broker", m-moves)
	}
	checkExactlyOnce(t, "r", 4500, addrs...)
	if l := c.logs[0].String(); !strings.Contains(l, "the broker stays live as last read") || !strings.Contains(l, "znode="+znode) {
		t.Fatalf("the admin's error does not say what it does and where:\n%s", l)
	}
}
