package test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"sluice/admin"
	"sluice/client"
	"sluice/internal/testbroker"
)

// TestClusterLoadWaitsForReleasedEnd: a broker giving a partition up writes in its
// release how far HDFS had acknowledged it, and the broker loading it does not start
// below that: HDFS showing less (a listing or a replica behind) would start the
// partition under acknowledged batches and fence them for good. The fault is injected
// by hand, because a real HDFS that lags its own acknowledgments cannot be made to on
// demand: the admin is stopped, the old owner paused (so it writes no release of its
// own), and a release claiming more than HDFS holds is written with the move. The new
// owner must refuse to load (and say why) until the release is corrected, which the
// old owner does itself once resumed (it gave everything up at its session's expiry:
// a release that knows nothing); then every record is read back exactly once.
func TestClusterLoadWaitsForReleasedEnd(t *testing.T) {
	c := startCluster(t, 2)
	b1, b2 := c.brokers[0], c.brokers[1]
	c.createTopic(t, "r", 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := client.NewProducer(ctx, "r", client.Brokers(b1.Addr), client.Linger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	produceIDs(t, p, 0, 400)
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	part := -1
	for i, addr := range owners(t, b2.Addr, "r") {
		if addr == b1.Addr {
			part = i
		}
	}
	if part < 0 {
		t.Fatal("no partition on the first broker")
	}
	pid := admin.PartitionID{Topic: "r", ID: part}

	c.admins[0].Process.Kill()
	waitFor(t, "the admin to be gone", func() bool { return syscall.Kill(c.admins[0].Process.Pid, 0) != nil })
	zc, err := admin.Dial(ctx, []string{c.zk.Addr}, "/sluice", 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer zc.Close()
	cur, err := zc.Owner(pid)
	if err != nil {
		t.Fatal(err)
	}
	epoch := cur.Epoch + 1
	resume := pause(t, b1)
	const claimed = 1_000_000 // far above the 400-odd records HDFS holds
	if err := zc.Release(pid, b1.Addr, epoch, claimed); err != nil {
		t.Fatal(err)
	}
	move := fmt.Sprintf(`{"broker":%q,"epoch":%d,"from":%q}`, b2.Addr, epoch, b1.Addr)
	if err := zc.WriteRaw(fmt.Sprintf("assignments/r/%d", part), []byte(move)); err != nil {
		t.Fatal(err)
	}
	if err := zc.WriteRaw("assignments", []byte(`{"generation": 1000}`)); err != nil { // wake the brokers
		t.Fatal(err)
	}
	refusal := fmt.Sprintf("below the %d its previous broker %s saw acknowledged", claimed, b1.Addr)
	waitFor(t, "the new owner to refuse the load", func() bool { return strings.Contains(b2.Log(), refusal) })
	loaded := fmt.Sprintf("msg=loaded topic=r partition=%d epoch=%d", part, epoch)
	if strings.Contains(b2.Log(), loaded) {
		t.Fatalf("the partition was loaded below what its release names:\n%s", b2.Log())
	}

	resume()
	waitFor(t, "the new owner to load once the release is corrected", func() bool { return strings.Contains(b2.Log(), loaded) })
	checkExactlyOnce(t, "r", 400, b1.Addr, b2.Addr)
}

// TestClusterDescribeThroughAnyBroker: `sluice topic describe` through one broker of a
// cluster shows every partition's state, those the broker does not serve too (asked of
// their owners): a non-zero session S for each.
func TestClusterDescribeThroughAnyBroker(t *testing.T) {
	c := startCluster(t, 2)
	c.createTopic(t, "d", 2)
	b1 := c.brokers[0]
	var out []byte
	defer func() {
		if t.Failed() {
			t.Logf("last description:\n%s", out)
		}
	}()
	waitFor(t, "every partition's state in the description", func() bool {
		var err error
		out, err = exec.Command(testbroker.Binary(t), "topic", "describe", "d", "--broker", b1.Addr).CombinedOutput()
		if err != nil {
			return false
		}
		rows := 0
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) != 7 || f[0] == "partition" {
				continue
			}
			if f[6] == "0" {
				return false
			}
			rows++
		}
		return rows == 2
	})
	if !strings.Contains(string(out), c.brokers[1].Addr) {
		t.Fatalf("the description does not name the second broker:\n%s", out)
	}
}
