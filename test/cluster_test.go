package test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sluice/admin"
	"sluice/batch"
	"sluice/client"
	"sluice/internal/peer/hdfstest"
	"sluice/internal/peer/zktest"
	"sluice/internal/testbroker"
	"sluice/persist/hdfs"
	"sluice/wire"
)

// A cluster on loopback: a real ZooKeeper, a real HDFS, a `sluice admin` process and
// broker processes that follow it (docs/cluster.md).

// clusterSession is the brokers' ZooKeeper session timeout in these tests.
const clusterSession = 2 * time.Second

// cluster is a ZooKeeper, an HDFS, one `sluice admin` and brokers, for one test.
type cluster struct {
	zk      *zktest.Server
	hdfs    *hdfstest.Cluster
	admins  []*exec.Cmd
	logs    []*syncBuf // the admins' output
	brokers []*testbroker.Broker
	session time.Duration // the brokers' ZooKeeper session timeout; 0: clusterSession
}

// startCluster starts a cluster of n brokers and one admin.
func startCluster(t testing.TB, n int) *cluster {
	t.Helper()
	return startClusterSession(t, n, clusterSession)
}

// startClusterSession is startCluster with the brokers' ZooKeeper session timeout (the
// admins keep theirs, startAdmin's). The ZooKeeper of zktest grants at most 10 s.
func startClusterSession(t testing.TB, n int, session time.Duration) *cluster {
	t.Helper()
	c := &cluster{zk: zktest.Start(t), hdfs: hdfstest.Start(t), session: session}
	c.addAdmin(t)
	for range n {
		c.addBroker(t)
	}
	return c
}

// addAdmin starts one more `sluice admin`.
func (c *cluster) addAdmin(t testing.TB) {
	t.Helper()
	cmd, log := startAdmin(t, c.zk.Addr, fmt.Sprintf("a%d", len(c.admins)+1))
	c.admins, c.logs = append(c.admins, cmd), append(c.logs, log)
}

// addBroker starts one more broker of the cluster.
func (c *cluster) addBroker(t testing.TB) *testbroker.Broker {
	t.Helper()
	return c.addBrokerVia(t, c.zk.Addr)
}

// addBrokerVia starts one more broker of the cluster that reaches ZooKeeper at zkAddr
// (a proxy in front of c.zk, for a test that cuts that broker off).
func (c *cluster) addBrokerVia(t testing.TB, zkAddr string) *testbroker.Broker {
	t.Helper()
	return c.addBrokerEnv(t, zkAddr, nil)
}

// addBrokerEnv is addBrokerVia with extra environment variables for the broker process
// (SLUICE_FAILPOINTS).
func (c *cluster) addBrokerEnv(t testing.TB, zkAddr string, env []string) *testbroker.Broker {
	t.Helper()
	b := testbroker.StartEnv(t, t.TempDir(), env, "-metrics", "127.0.0.1:0", "-hdfs.addr", c.hdfs.Addr, "-hdfs.timeout", "5s",
		"-hdfs.commit_interval", "20ms", "-zk", zkAddr, "-zk.session_timeout", c.brokerSession().String())
	c.brokers = append(c.brokers, b)
	return b
}

// brokerSession is the brokers' ZooKeeper session timeout.
func (c *cluster) brokerSession() time.Duration {
	if c.session == 0 {
		return clusterSession
	}
	return c.session
}

// createTopic creates a topic through the first broker and waits until its partitions
// are spread evenly over every broker.
func (c *cluster) createTopic(t testing.TB, name string, partitions int) {
	t.Helper()
	a, err := client.NewAdmin(client.Brokers(c.brokers[0].Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := a.CreateTopic(ctx, name, partitions, wire.TopicOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSpread(t, name, partitions, c.brokers)
}

// waitSpread waits until a topic's partitions are spread evenly over brokers, as the
// metadata of the first says.
func waitSpread(t testing.TB, topic string, partitions int, brokers []*testbroker.Broker) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s spread over %d brokers", topic, len(brokers)), func() bool {
		m := servedBy(owners(t, brokers[0].Addr, topic))
		for _, b := range brokers {
			if m[b.Addr] != partitions/len(brokers) {
				return false
			}
		}
		return true
	})
}

// addrsOf returns the brokers' addresses.
func addrsOf(brokers []*testbroker.Broker) []string {
	var addrs []string
	for _, b := range brokers {
		addrs = append(addrs, b.Addr)
	}
	return addrs
}

// owners returns each partition's broker address as the metadata of the broker at addr
// says ("" for a partition with no live broker).
func owners(t testing.TB, addr, topic string) []string {
	t.Helper()
	w := dial(t, addr)
	defer w.conn.Close()
	resp := w.call(&wire.MetadataRequest{Topics: []string{topic}})
	mustOK(t, resp)
	md := resp.Body.(*wire.MetadataResponse)
	if len(md.Topics) != 1 {
		return nil
	}
	var out []string
	for _, p := range md.Topics[0].Partitions {
		out = append(out, p.Addr)
	}
	return out
}

// servedBy counts a topic's partitions per broker address.
func servedBy(parts []string) map[string]int {
	m := map[string]int{}
	for _, a := range parts {
		m[a]++
	}
	return m
}

// produceIDs produces records with ids [from, to) and waits until all are persisted
// (on HDFS).
func produceIDs(t *testing.T, p *client.Producer, from, to int) {
	t.Helper()
	if err := tryProduceIDs(p, from, to); err != nil {
		t.Fatal(err)
	}
}

// tryProduceIDs is produceIDs for a goroutine of the test's own.
func tryProduceIDs(p *client.Producer, from, to int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := from; i < to; i++ {
		if err := p.Produce(ctx, idRecord(i)); err != nil {
			return fmt.Errorf("produce %d: %w", i, err)
		}
	}
	if err := p.WaitPersisted(ctx); err != nil {
		return fmt.Errorf("records %d..%d not persisted: %w", from, to, err)
	}
	return nil
}

// idRecord is the record of id i: its key one of 13, its value 64 bytes holding i.
func idRecord(i int) *client.Record {
	v := make([]byte, 64)
	binary.LittleEndian.PutUint64(v, uint64(i))
	return &client.Record{Key: []byte(fmt.Sprint(i % 13)), Value: v}
}

// checkExactlyOnce reads the topic from its oldest record through the brokers at addrs
// and checks that ids [0, n) each come back exactly once, in produce order per key. It
// returns how many other records (not made by produceIDs) it read.
func checkExactlyOnce(t testing.TB, topic string, n int, addrs ...string) (others int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.NewConsumer(ctx, topic, client.Brokers(addrs...), client.Start(client.Oldest()),
		client.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seen := make([]int, n)
	last := map[string]int{}
	got := 0
	for empty := 0; got < n || empty < 3; {
		if err := c.Poll(ctx); err != nil {
			t.Fatalf("poll after %d records: %v", got, err)
		}
		before := got
		for c.Next() {
			r := c.Record()
			if len(r.Value) != 64 {
				others++
				continue
			}
			id := int(binary.LittleEndian.Uint64(r.Value))
			if id < 0 || id >= n {
				t.Fatalf("record %d was never produced", id)
			}
			if prev, ok := last[string(r.Key)]; ok && id <= prev {
				t.Fatalf("key %s: record %d after %d", r.Key, id, prev)
			}
			last[string(r.Key)] = id
			seen[id]++
			got++
		}
		if err := c.Err(); err != nil {
			t.Fatal(err)
		}
		if got == before && got >= n {
			empty++
		}
	}
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("record %d read %d times (want once; %d records read in all)", id, k, got)
		}
	}
	return others
}

// TestClusterBrokerKilled: two brokers share a topic's partitions; kill -9 of one, while
// a producer is writing to both, moves its partitions to the other within seconds (the
// admin sees its registration expire), the producer, whose only seed was the dead
// broker, follows them through the metadata and sends again what the dead broker had not
// made durable, and every record it produced, before, during and after, is read back
// exactly once and in order per key.
func TestClusterBrokerKilled(t *testing.T) {
	c := startCluster(t, 2)
	b1, b2 := c.brokers[0], c.brokers[1]
	c.createTopic(t, "c", 4)
	// The producer is given only the broker about to die: it must find the other from
	// the metadata (client.Admin learns the brokers it names), as Kafka's clients do.
	load := startIDLoad(t, "c", b1.Addr)
	load.waitSent(t, "records before the kill", 3000)
	killed := time.Now()
	b1.Kill() // the load goes on: records in flight to b1
	waitFor(t, "every partition on the broker left", func() bool {
		return servedBy(owners(t, b2.Addr, "c"))[b2.Addr] == 4
	})
	t.Logf("partitions moved %v after the kill (session timeout %v)", time.Since(killed).Round(time.Millisecond), clusterSession)
	waitFor(t, "the survivor's figures to show the move", func() bool {
		return scrape(t, b2.MetricsAddr, `sluice_cluster_partitions{assigned_to="live_broker"}`) == 4 &&
			scrape(t, b2.MetricsAddr, `sluice_cluster_brokers`) == 1 &&
			scrape(t, b2.MetricsAddr, `sluice_cluster_moves_total{kind="load"}`) == 4
	})
	if lease := scrape(t, b2.MetricsAddr, `sluice_cluster_lease_seconds`); lease <= 0 || lease > clusterSession.Seconds()/2 {
		t.Fatalf("the survivor's lease is %v s, want in (0, %v]", lease, clusterSession.Seconds()/2)
	}
	load.waitSent(t, "records after the move", 3000)
	checkExactlyOnce(t, "c", load.finish(t), b2.Addr)
	if !strings.Contains(b2.Log(), "loaded") {
		t.Fatalf("the surviving broker never logged a load:\n%s", b2.Log())
	}
	// The operator's view: every partition on the survivor, with the figures it reports.
	var out []byte
	waitFor(t, "cluster status to show every partition's figures", func() bool {
		var err error
		out, err = exec.Command(testbroker.Binary(t), "cluster", "status", "-zk", c.zk.Addr).CombinedOutput()
		if err != nil {
			t.Fatalf("cluster status: %v\n%s", err, out)
		}
		n := 0
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) == 6 && f[0] == "c" && f[2] == b2.Addr && f[4] != "-" {
				n++
			}
		}
		return n == 4
	})
}

// TestClusterPausedBrokerFenced: a broker paused past its session timeout loses its
// partitions to the other broker; when it resumes it takes no write for them (not_owner,
// at once: its lease lapsed during the pause), and what the producer wrote meanwhile is
// read back exactly once.
func TestClusterPausedBrokerFenced(t *testing.T) {
	c := startCluster(t, 2)
	b1, b2 := c.brokers[0], c.brokers[1]
	c.createTopic(t, "f", 2)
	var onB1 uint32
	for i, addr := range owners(t, b2.Addr, "f") {
		if addr == b1.Addr {
			onB1 = uint32(i)
		}
	}
	w1 := dial(t, b1.Addr)
	waitFor(t, "the broker assigned the partition to take writes", func() bool { // it loads after the assignment
		r := w1.call(&wire.ProduceRequest{Topic: []byte("f"), Partition: onB1, Version: 1,
			WaitDurableMs: 30000, Batches: records(0, -1, "before", 10)})
		return r.Header.Code == wire.CodeNone
	})
	resume := pause(t, b1)
	waitFor(t, "the paused broker's partition to move", func() bool {
		return servedBy(owners(t, b2.Addr, "f"))[b2.Addr] == 2
	})
	w2 := dial(t, b2.Addr)
	waitFor(t, "the new owner to take writes", func() bool {
		r := w2.call(&wire.ProduceRequest{Topic: []byte("f"), Partition: onB1, Version: 1,
			WaitDurableMs: 30000, Batches: records(0, -1, "after", 10)})
		return r.Header.Code == wire.CodeNone
	})
	resume()
	// The first answer after the pause already refuses: the lease lapsed while paused.
	r := w1.call(&wire.ProduceRequest{Topic: []byte("f"), Partition: onB1, Version: 1,
		Batches: records(0, -1, "stale", 10)})
	if r.Header.Code != wire.CodeNotOwner && r.Header.Code != wire.CodeNotServing {
		t.Fatalf("the resumed broker answered a write for a partition that moved with %v (%s)", r.Header.Code, r.Text)
	}
	want := appendValues(appendValues(nil, "before", 10), "after", 10)
	if got := partitionValues(t, w2, "f", onB1, 20); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the new owner holds %v, want %v", got, want)
	}
}

// partitionValues fetches a partition's record values from offset 0 to end.
func partitionValues(t *testing.T, w *wireConn, topic string, part uint32, end int64) []string {
	t.Helper()
	var vals []string
	walkBatches(t, w, topic, part, end, func(_ batch.Header, b []byte) {
		var it batch.Iter
		if err := it.Reset(b); err != nil {
			t.Fatal(err)
		}
		for it.Next() {
			vals = append(vals, string(it.Record().Value))
		}
	})
	return vals
}

// walkBatches fetches a partition's batches from offset 0 to end and hands each to fn.
func walkBatches(t *testing.T, w *wireConn, topic string, part uint32, end int64, fn func(h batch.Header, b []byte)) {
	t.Helper()
	for off := int64(0); off < end; {
		resp := w.call(&wire.FetchRequest{Topic: []byte(topic), Partition: part, Offset: off, MaxBytes: 1 << 20})
		mustOK(t, resp)
		b := resp.Body.(*wire.FetchResponse).Records
		if len(b) == 0 {
			t.Fatalf("empty fetch of %s/%d at %d below %d", topic, part, off, end)
		}
		for len(b) > 0 {
			h, err := batch.ParseHeader(b)
			if err != nil {
				t.Fatal(err)
			}
			fn(h, b[:h.Size()])
			off = h.LastOffset() + 1
			b = b[h.Size():]
		}
	}
}

// TestClusterJoinMovesUnloadFirst: a topic on one broker; a second broker joins and the
// admin moves half the partitions to it while a producer keeps writing. Each move is
// unload first: the old broker ships what it holds to HDFS and releases the partition
// before the new one loads it, so every record acknowledged as persisted is read back
// exactly once, in order per key, from the new owners.
func TestClusterJoinMovesUnloadFirst(t *testing.T) {
	c := startCluster(t, 1)
	b1 := c.brokers[0]
	c.createTopic(t, "j", 4)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := client.NewProducer(ctx, "j", client.Brokers(b1.Addr), client.Linger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	produceIDs(t, p, 0, 2000)
	done := make(chan error, 1)
	produced := 2000
	go func() { // writes on while partitions move
		for produced < 12000 {
			if err := tryProduceIDs(p, produced, produced+500); err != nil {
				done <- err
				return
			}
			produced += 500
		}
		done <- nil
	}()
	b2 := c.addBroker(t)
	waitFor(t, "half the partitions moved to the broker that joined", func() bool {
		m := servedBy(owners(t, b1.Addr, "j"))
		return m[b1.Addr] == 2 && m[b2.Addr] == 2
	})
	if err := <-done; err != nil {
		t.Fatalf("while partitions moved: %v", err)
	}
	checkExactlyOnce(t, "j", produced, b1.Addr, b2.Addr)
	if !strings.Contains(b1.Log(), "released") || !strings.Contains(b2.Log(), "loaded") {
		t.Fatalf("no release on the old broker or no load on the new one:\n%s\n%s", b1.Log(), b2.Log())
	}
}

// TestClusterZooKeeperDown: ZooKeeper killed for longer than the session timeout while a
// producer writes, then started again on its data. Without ZooKeeper the brokers' leases
// lapse (produce is refused not_owner, nothing more is acknowledged as persisted); once
// it is back, sessions expired or not, the brokers register again, take their
// partitions back (a new session S) and the producer carries on. Every record
// acknowledged as persisted is read back exactly once, in order per key.
func TestClusterZooKeeperDown(t *testing.T) {
	c := startCluster(t, 2)
	c.createTopic(t, "z", 4)
	addrs := []string{c.brokers[0].Addr, c.brokers[1].Addr}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := client.NewProducer(ctx, "z", client.Brokers(addrs...), client.Linger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	produceIDs(t, p, 0, 2000)
	var mine uint32 // a partition the first broker serves
	for i, a := range owners(t, addrs[0], "z") {
		if a == addrs[0] {
			mine = uint32(i)
		}
	}
	w := dial(t, addrs[0])
	mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("z"), Partition: mine, Version: 1, Batches: records(0, -1, "x", 1)}))
	c.zk.Kill()
	time.Sleep(2 * clusterSession) // past every lease
	r := w.call(&wire.ProduceRequest{Topic: []byte("z"), Partition: mine, Version: 1, Batches: records(0, -1, "x", 1)})
	if r.Header.Code != wire.CodeNotOwner {
		t.Fatalf("a broker without ZooKeeper answered a write with %v (%s)", r.Header.Code, r.Text)
	}
	c.zk.Restart(t)
	produceIDs(t, p, 2000, 4000) // waits (retrying) until the partitions are served again
	if others := checkExactlyOnce(t, "z", 4000, addrs...); others != 1 {
		t.Fatalf("read %d records besides the producer's, want the 1 written by hand", others)
	}
}

// TestClusterAdminKilled: three brokers, two admins, a producer writing all along. The
// leading admin is killed (the other takes over), then a broker: the new leader moves
// its partitions to the two left. Every record produced is read back exactly once, in
// order per key.
func TestClusterAdminKilled(t *testing.T) {
	c := startCluster(t, 3)
	c.addAdmin(t)
	c.createTopic(t, "k", 6)
	addrs := []string{c.brokers[0].Addr, c.brokers[1].Addr, c.brokers[2].Addr}
	load := startIDLoad(t, "k", addrs...)
	load.waitSent(t, "records before the admin's kill", 1500)
	leader := 0
	if !strings.Contains(c.logs[0].String(), "admin leading") {
		leader = 1
	}
	c.admins[leader].Process.Kill()
	waitFor(t, "the other admin to lead", func() bool { return strings.Contains(c.logs[1-leader].String(), "admin leading") })
	load.waitSent(t, "records before the broker's kill", 1500)
	c.brokers[2].Kill()
	waitFor(t, "the dead broker's partitions on the two left", func() bool {
		m := servedBy(owners(t, addrs[0], "k"))
		return m[addrs[0]] == 3 && m[addrs[1]] == 3
	})
	load.waitSent(t, "records after the move", 1500)
	checkExactlyOnce(t, "k", load.finish(t), addrs[:2]...)
}

// TestClusterJunkAssignment: an assignment znode edited by hand into junk (the admin
// stopped, so nobody writes it again) does not make its broker give the partition up:
// it keeps serving it, and says nothing of a move.
func TestClusterJunkAssignment(t *testing.T) {
	c := startCluster(t, 1)
	c.createTopic(t, "q", 2)
	b := c.brokers[0]
	w := dial(t, b.Addr)
	waitFor(t, "partition 0 to take writes", func() bool {
		return w.call(&wire.ProduceRequest{Topic: []byte("q"), Version: 1, Batches: records(0, -1, "a", 1)}).Header.Code == wire.CodeNone
	})
	c.admins[0].Process.Kill()
	zc, err := admin.Dial(context.Background(), []string{c.zk.Addr}, "/sluice", 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer zc.Close()
	if err := zc.WriteRaw("assignments/q/0", []byte("{junk")); err != nil {
		t.Fatal(err)
	}
	if err := zc.WriteRaw("assignments", []byte(`{"generation": 99}`)); err != nil { // wake the broker
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the broker reads the assignments at once (and every 5 s)
	mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("q"), Version: 1, Batches: records(0, -1, "b", 1)}))
	if strings.Contains(b.Log(), "gave up") {
		t.Fatalf("the broker gave a partition up for a junk assignment:\n%s", b.Log())
	}
}

// TestClusterJunkAssignmentID: an assignment znode edited in by hand whose name is not
// a partition of its topic ("-1") is left out, not a crash: the broker, which reads
// every assignment on each change, goes on following (a topic created after it is
// loaded and takes writes).
func TestClusterJunkAssignmentID(t *testing.T) {
	c := startCluster(t, 1)
	c.createTopic(t, "k", 1)
	c.zk.Create(t, "/sluice/assignments/k/-1", `{"broker":"nobody","epoch":1}`)
	c.createTopic(t, "k2", 1) // assigned, so the broker reads every assignment again
	w := dial(t, c.brokers[0].Addr)
	waitFor(t, "the new topic to take writes", func() bool {
		r := w.call(&wire.ProduceRequest{Topic: []byte("k2"), Partition: 0, Version: 1,
			WaitDurableMs: 30000, Batches: records(0, -1, "after-junk", 3)})
		return r.Header.Code == wire.CodeNone
	})
}

// TestClusterMetadataWhileLoading: clients ask for metadata all the time while
// partitions move (every not_owner sends them there); a broker taking over many
// partitions at once must keep answering it and finish every load. (A metadata answer
// reads each partition's broker under the cluster lock while it holds the topics' read
// lock, and a load swaps its partition in under the topics' write lock while it holds
// the cluster lock: opposite orders.)
func TestClusterMetadataWhileLoading(t *testing.T) {
	c := startCluster(t, 2)
	b1, b2 := c.brokers[0], c.brokers[1]
	const parts = 32
	c.createTopic(t, "m", parts)
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for range cap(errs) {
		go func() { errs <- askMetadata(b2.Addr, "m", stop) }()
	}
	b1.Kill()
	waitFor(t, "every partition on the survivor", func() bool { return servedBy(owners(t, b2.Addr, "m"))[b2.Addr] == parts })
	w := dial(t, b2.Addr)
	for i := range uint32(parts) {
		waitFor(t, fmt.Sprintf("partition %d to take writes on the survivor", i), func() bool {
			r := w.call(&wire.ProduceRequest{Topic: []byte("m"), Partition: i, Version: 1,
				WaitDurableMs: 30000, Batches: records(0, -1, "m", 1)})
			return r.Header.Code == wire.CodeNone
		})
	}
	close(stop)
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Fatalf("metadata while the partitions loaded: %v", err)
		}
	}
}

// askMetadata asks the broker at addr for a topic's metadata, one request after the
// other on one connection, until stop is closed; it returns the first failure (an
// answer that does not come within 30 s included).
func askMetadata(addr, topic string, stop <-chan struct{}) error {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	w := &wireConn{conn: conn, r: bufio.NewReaderSize(conn, 1<<20)}
	body := &wire.MetadataRequest{Topics: []string{topic}}
	for id := uint32(1); ; id++ {
		select {
		case <-stop:
			return nil
		default:
		}
		v, _, _ := body.Key().Versions()
		req := wire.Request{Header: wire.RequestHeader{APIKey: body.Key(), APIVersion: v, RequestID: id}, Body: body}
		if _, err := conn.Write(req.AppendTo(nil)); err != nil {
			return err
		}
		frame, err := w.readFrame()
		if err != nil {
			return fmt.Errorf("request %d: %w", id, err)
		}
		var resp wire.Response
		if _, err := resp.Decode(frame, wire.DefaultMaxFrame); err != nil {
			return err
		}
		if resp.Header.Code != wire.CodeNone {
			return fmt.Errorf("request %d: %v %s", id, resp.Header.Code, resp.Text)
		}
	}
}

// TestClusterLateCommitNotServed: the broker a partition moved from finishes a commit on
// HDFS after the new owner read HDFS's end (its round was under way; it is never
// acknowledged). Until the new owner's first file fences it, that data sits on HDFS past
// the new owner's start, in the old epoch. The new owner must not serve it to a consumer
// reading the older offsets from HDFS: the offsets are the new owner's to give to other
// records (the consumer would read a record never acknowledged and skip those). The old
// owner is played by a writer of persist/hdfs at an older epoch, appending to its file.
func TestClusterLateCommitNotServed(t *testing.T) {
	c := startCluster(t, 1)
	br := c.brokers[0]
	conn, err := hdfs.NewConn(hdfs.Options{Addresses: []string{c.hdfs.Addr}, User: "sluice", Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	old := hdfs.NewWriter(hdfs.PartitionDir("/sluice", "l", 0), 1, 0, hdfs.WriterOptions{})
	commit := func(prefix string, n int) {
		b := records(0, -1, prefix, n)
		batch.SetBaseOffset(b, old.Next())
		if err := old.Commit(context.Background(), conn, [][]byte{b}); err != nil {
			t.Fatal(err)
		}
	}
	commit("old", 5) // offsets 0..4, the old owner's, acknowledged
	c.createTopic(t, "l", 1)
	waitFor(t, "the partition loaded", func() bool {
		return scrape(t, br.MetricsAddr, `sluice_cluster_moves_total{kind="load"}`) == 1
	})
	commit("late", 1)                                      // offset 5: the old owner's round lands after the load read HDFS's end
	got := partitionValues(t, dial(t, br.Addr), "l", 0, 5) // a consumer reading from 0
	if want := appendValues(nil, "old", 5); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("a fetch from offset 0 read %v, want %v (nothing at or past the new owner's start, 5)", got, want)
	}
}

// TestClusterSameIDWhileAlive: a broker hangs (paused, as an operator sees it) and a new
// one is started with the same -broker.id before the hung one's session expired; then
// the hung one resumes, its session still alive. Its partition must never be writable
// on both at once (the two would write the same offsets, and the older epoch's
// acknowledged writes are fenced on HDFS by the newer one's files).
func TestClusterSameIDWhileAlive(t *testing.T) {
	c := &cluster{zk: zktest.Start(t), hdfs: hdfstest.Start(t)}
	startAdmin(t, c.zk.Addr, "a1")
	const session = 15 * time.Second
	start := func() *testbroker.Broker {
		return testbroker.Start(t, t.TempDir(), "-hdfs.addr", c.hdfs.Addr, "-hdfs.timeout", "5s", "-hdfs.commit_interval", "20ms",
			"-zk", c.zk.Addr, "-zk.session_timeout", session.String(), "-broker.id", "x")
	}
	hung := start()
	c.brokers = []*testbroker.Broker{hung}
	c.createTopic(t, "s", 1)
	writable := func(w *wireConn) bool {
		r := w.call(&wire.ProduceRequest{Topic: []byte("s"), Partition: 0, Version: 1, Batches: records(0, -1, "v", 1)})
		return r.Header.Code == wire.CodeNone
	}
	wHung := dial(t, hung.Addr)
	waitFor(t, "the first broker to take writes", func() bool { return writable(wHung) })
	resume := pause(t, hung)
	again := start()
	wAgain := dial(t, again.Addr)
	waitFor(t, "the broker started again to take writes", func() bool { return writable(wAgain) })
	resume()
	// Watch both for more than a lease renewal (a fifth of the session) of the resumed one.
	for i := 0; i < 40; i++ {
		if writable(wHung) && writable(wAgain) {
			t.Fatalf("both brokers named x take writes for s/0 (round %d after the hung one resumed)", i)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// pause stops broker b (SIGSTOP) and returns the function that resumes it; the test's
// end resumes it too if the test did not (so its cleanup can stop it).
func pause(t testing.TB, b *testbroker.Broker) (resume func()) {
	t.Helper()
	return pausePid(t, b.Pid())
}

// pausePid stops a process of the test's (SIGSTOP) and returns the function that resumes
// it; the test's end resumes it too.
func pausePid(t testing.TB, pid int) (resume func()) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	resume = func() { once.Do(func() { syscall.Kill(pid, syscall.SIGCONT) }) }
	t.Cleanup(resume)
	return resume
}
