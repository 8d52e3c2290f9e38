package test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sluice/batch"
	"sluice/client"
	"sluice/internal/testbroker"
	"sluice/wire"
)

// Topic expansion in a cluster (docs/cluster.md, "Expansion"): real ZooKeeper, HDFS,
// admin and broker processes.

// expandLoad is the keyed load of an expansion test: producers, each with its own keys,
// writing ids 0, 1, ... in order; a record's value is its producer and id.
type expandLoad struct {
	producers int
	keys      int
}

// key is the key of producer p's record id.
func (l expandLoad) key(p, id int) string { return fmt.Sprintf("p%d-k%d", p, id%l.keys) }

func expandValue(p, id int) []byte {
	v := make([]byte, 64)
	binary.LittleEndian.PutUint64(v, uint64(p))
	binary.LittleEndian.PutUint64(v[8:], uint64(id))
	return v
}

// produce writes producer p's ids until stop is closed (at least least of them), then waits
// until everything is persisted; it returns how many it wrote.
func (l expandLoad) produce(addrs []string, p, least int, stop <-chan struct{}) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pr, err := client.NewProducer(ctx, "e", client.Brokers(addrs...), client.Linger(time.Millisecond))
	if err != nil {
		return 0, err
	}
	n := 0
	for ; ; n++ {
		if n >= least {
			select {
			case <-stop:
				if err := pr.WaitPersisted(ctx); err != nil {
					return n, fmt.Errorf("producer %d: %d records not persisted: %w", p, n, err)
				}
				return n, pr.Close(ctx)
			default:
			}
		}
		if err := pr.Produce(ctx, &client.Record{Key: []byte(l.key(p, n)), Value: expandValue(p, n)}); err != nil {
			return n, fmt.Errorf("producer %d, record %d: %w", p, n, err)
		}
		if n%200 == 0 {
			time.Sleep(time.Millisecond) // a steady load, not a flood the 2 shared cores drown in
		}
	}
}

// consumeChecked reads the topic from its oldest record, checking on every record that
// each key's ids come in produce order with none repeated, until it has read want[p]
// ids of every producer p (want is read under mu, and may grow), or until stop.
type checked struct {
	mu   sync.Mutex
	want []int // ids per producer to read before stopping; -1 while unknown
	got  []int
	err  error
	// start is where the consumer starts (the zero value: the oldest record); with tail
	// it stops once it read the last id of every producer (want[p]-1), not want[p] ids.
	start client.StartAt
	tail  bool
	max   []int
}

func (c *checked) consume(addrs []string, l expandLoad) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	fail := func(err error) {
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
	}
	cs, err := client.NewConsumer(ctx, "e", client.Brokers(addrs...), client.Start(c.start),
		client.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		fail(err)
		return
	}
	defer cs.Close()
	last := map[string]int{}
	where := map[string][2]int64{} // the partition and offset of each key's last record read
	seen := map[[2]int]bool{}
	for {
		c.mu.Lock()
		done := true
		for p := range l.producers {
			if c.tail {
				done = done && c.want[p] >= 0 && c.max[p] >= c.want[p]-1
			} else {
				done = done && c.want[p] >= 0 && c.got[p] >= c.want[p]
			}
		}
		c.mu.Unlock()
		if done {
			return
		}
		if err := cs.Poll(ctx); err != nil {
			var pos []int64
			for i := range 8 {
				x, _ := cs.Position(i)
				pos = append(pos, x)
			}
			fail(fmt.Errorf("poll: %w (positions of partitions 0-7: %v)", err, pos))
			return
		}
		for cs.Next() {
			r := cs.Record()
			p, id := int(binary.LittleEndian.Uint64(r.Value)), int(binary.LittleEndian.Uint64(r.Value[8:]))
			if string(r.Key) != l.key(p, id) {
				fail(fmt.Errorf("record %d of producer %d has key %s", id, p, r.Key))
				return
			}
			if prev, ok := last[string(r.Key)]; ok && id <= prev {
				fail(fmt.Errorf("key %s: record %d (partition %d offset %d) after %d (partition %d offset %d)", r.Key, id,
					cs.Partition(), r.Offset, prev, where[string(r.Key)][0], where[string(r.Key)][1]))
				return
			}
			if seen[[2]int{p, id}] {
				fail(fmt.Errorf("record %d of producer %d read twice", id, p))
				return
			}
			seen[[2]int{p, id}] = true
			last[string(r.Key)] = id
			where[string(r.Key)] = [2]int64{int64(cs.Partition()), r.Offset}
			c.mu.Lock()
			c.got[p]++
			c.max[p] = max(c.max[p], id)
			c.mu.Unlock()
		}
		if err := cs.Err(); err != nil {
			fail(err)
			return
		}
	}
}

// stopLoad ends an expansion test's load: stop is closed, the producers' counts (every
// producer must have succeeded) become what the checked consumers wait for, and each of
// them must have read all of it in order.
func stopLoad(t *testing.T, stop chan struct{}, pwg *sync.WaitGroup, counts []int, perrs []error,
	consumers []*checked, cwg *sync.WaitGroup) {
	t.Helper()
	close(stop)
	pwg.Wait()
	for p, err := range perrs {
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("producer %d wrote %d records", p, counts[p])
	}
	for _, cc := range consumers {
		cc.mu.Lock()
		copy(cc.want, counts)
		cc.mu.Unlock()
	}
	cwg.Wait()
	for i, cc := range consumers {
		if cc.err != nil {
			t.Fatalf("consumer %d: %v (read %v of %v)", i, cc.err, cc.got, counts)
		}
	}
}

// runChecked starts consumers that check order per key while they read.
func runChecked(addrs []string, l expandLoad, n int) ([]*checked, *sync.WaitGroup) {
	var wg sync.WaitGroup
	var cs []*checked
	for range n {
		cs = append(cs, runCheckedFrom(addrs, l, client.Oldest(), false, &wg))
	}
	return cs, &wg
}

// runCheckedFrom starts one checking consumer that starts at start (see checked.tail).
func runCheckedFrom(addrs []string, l expandLoad, start client.StartAt, tail bool, wg *sync.WaitGroup) *checked {
	c := &checked{want: make([]int, l.producers), got: make([]int, l.producers), max: make([]int, l.producers),
		start: start, tail: tail}
	for p := range c.want {
		c.want[p], c.max[p] = -1, -1
	}
	wg.Add(1)
	go func() { defer wg.Done(); c.consume(addrs, l) }()
	return c
}

// TestClusterExpandUnderLoad: keyed, idempotent producers write continuously while two
// consumers read; the topic is expanded from 2 to 5 partitions through the CLI (and a
// concurrent expansion to 6 through the API loses with a clear error, or wins if it came
// first; should the two not overlap, both win, one after the other). Afterwards every
// record was read once, each key's records in produce order, by the consumers that ran
// through the expansion and by one started after; the new partitions are placed on the
// brokers and serving; and each old partition's batches carry the old layout's stamp
// below its switch offset and the new one's from it on.
func TestClusterExpandUnderLoad(t *testing.T) {
	c := startCluster(t, 2)
	c.createTopic(t, "e", 2)
	addrs := []string{c.brokers[0].Addr, c.brokers[1].Addr}
	load := expandLoad{producers: 2, keys: 17}
	consumers, cwg := runChecked(addrs, load, 2)
	stop := make(chan struct{})
	counts := make([]int, load.producers)
	perrs := make([]error, load.producers)
	var pwg sync.WaitGroup
	for p := range load.producers {
		pwg.Add(1)
		go func() { defer pwg.Done(); counts[p], perrs[p] = load.produce(addrs, p, 3000, stop) }()
	}
	time.Sleep(2 * time.Second) // under way

	lost := make(chan error, 1)
	go func() {
		a, err := client.NewAdmin(client.Brokers(addrs[1]))
		if err == nil {
			defer a.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err = a.ExpandTopic(ctx, "e", 6)
		}
		lost <- err
	}()
	out, err := exec.Command(testbroker.Binary(t), "topic", "expand", "e", "--partitions", "5", "--broker", addrs[0],
		"--timeout", "90s").CombinedOutput()
	other := <-lost
	won, layouts := 5, 2
	switch {
	case err == nil && other == nil:
		// Not concurrent after all (a slow host can run them one after the other): the
		// API's expansion read the CLI's layout once both old partitions had switched, so
		// it rightly expanded again (version 3, 6 partitions). The race itself is
		// admin's TestExpandTopic; here the load must survive two expansions.
		won, layouts = 6, 3
		t.Logf("the expansions did not overlap: 2 → 5 → 6 partitions")
	case err != nil && other != nil:
		t.Fatalf("both expansions failed: %v\n%s\n%v", err, out, other)
	case err != nil:
		won = 6 // the API's won: the CLI must have said why it lost
		if !strings.Contains(string(out), "topic_changed") && !strings.Contains(string(out), "invalid_config") {
			t.Fatalf("the losing expansion's error is unclear: %v\n%s", err, out)
		}
	default:
		if !client.IsCode(other, wire.CodeTopicChanged) && !client.IsCode(other, wire.CodeInvalidConfig) {
			t.Fatalf("the losing expansion's error is unclear: %v", other)
		}
	}
	t.Logf("%d partitions after the expansions; CLI: %s (API: %v)", won, strings.TrimSpace(string(out)), other)
	time.Sleep(3 * time.Second) // the load goes on in the new layout
	stopLoad(t, stop, &pwg, counts, perrs, consumers, cwg)
	after, awg := runChecked(addrs, load, 1) // a consumer that starts after the expansion
	after[0].mu.Lock()
	copy(after[0].want, counts)
	after[0].mu.Unlock()
	awg.Wait()
	if after[0].err != nil {
		t.Fatalf("consumer started after the expansion: %v", after[0].err)
	}
	// Placed and serving: every partition has a broker, both brokers serve some, and the
	// new partitions took records.
	parts := owners(t, addrs[0], "e")
	if len(parts) != won || servedBy(parts)[""] != 0 || servedBy(parts)[addrs[0]] == 0 || servedBy(parts)[addrs[1]] == 0 {
		t.Fatalf("partitions after the expansion: %v", parts)
	}
	resp := dial(t, addrs[0]).call(&wire.TopicLayoutsRequest{Name: "e"})
	mustOK(t, resp)
	ls := resp.Body.(*wire.TopicLayoutsResponse).Layouts
	if len(ls) != layouts || ls[len(ls)-1].Version != uint32(layouts) || ls[len(ls)-1].Partitions != uint32(won) {
		t.Fatalf("layouts %+v", ls)
	}
	next := make([]int64, won) // each partition's end, as its broker says
	for i, addr := range parts {
		resp := dial(t, addr).call(&wire.DescribeTopicRequest{Name: "e"})
		mustOK(t, resp)
		next[i] = resp.Body.(*wire.DescribeTopicResponse).Partitions[i].NextOffset
		if i >= 2 && next[i] == 0 {
			t.Fatalf("new partition %d took no record", i)
		}
	}
	t.Logf("layouts %+v, ends %v", ls, next)
	// Each partition: the stamp of the layout it was created in, then of each later layout
	// from its switch offset on.
	for i := range parts {
		wo := dial(t, parts[i])
		for _, st := range partitionStamps(t, wo, "e", uint32(i), next[i]) {
			if want := layoutAt(ls, i, st.base); st.layout != want {
				t.Fatalf("partition %d (layouts %+v): the batch at %d is stamped %d, want %d", i, ls, st.base, st.layout, want)
			}
		}
	}
}

// layoutAt returns the layout stamp a batch of partition i at base must carry: the
// version of the first layout that has partition i, raised to each later layout whose
// switch offset for i is at or below base (a switch of -1 has not happened).
func layoutAt(ls []wire.Layout, i int, base int64) uint16 {
	var v uint32
	for _, l := range ls {
		switch {
		case v == 0 && i < int(l.Partitions):
			v = l.Version
		case v != 0 && i < len(l.Switches) && l.Switches[i] >= 0 && base >= l.Switches[i]:
			v = l.Version
		}
	}
	return uint16(v)
}

type stamped struct {
	base   int64
	layout uint16
}

// partitionStamps returns the base offset and layout stamp of every batch of a partition
// below end.
func partitionStamps(t *testing.T, w *wireConn, topic string, part uint32, end int64) []stamped {
	t.Helper()
	var out []stamped
	walkBatches(t, w, topic, part, end, func(h batch.Header, _ []byte) {
		out = append(out, stamped{h.BaseOffset, h.Layout})
	})
	return out
}

// clusterAdmin returns an Admin for the cluster's first broker and a context of a
// minute; the test's cleanup closes them.
func clusterAdmin(t *testing.T, c *cluster) (*client.Admin, context.Context) {
	t.Helper()
	a, err := client.NewAdmin(client.Brokers(c.brokers[0].Addr))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(func() { cancel(); a.Close() })
	return a, ctx
}

// TestClusterExpandBadInput: fewer or as many partitions, more than 65536, an unknown
// topic: clear errors, nothing changed.
func TestClusterExpandBadInput(t *testing.T) {
	c := startCluster(t, 1)
	c.createTopic(t, "e", 2)
	a, ctx := clusterAdmin(t, c)
	for _, tc := range []struct {
		topic string
		n     int
		code  wire.Code
	}{{"e", 1, wire.CodeInvalidConfig}, {"e", 2, wire.CodeInvalidConfig}, {"e", 65537, wire.CodeInvalidConfig},
		{"nosuch", 4, wire.CodeUnknownTopic}} {
		if _, err := a.ExpandTopic(ctx, tc.topic, tc.n); !client.IsCode(err, tc.code) {
			t.Fatalf("expand %s to %d: %v, want %v", tc.topic, tc.n, err, tc.code)
		}
	}
	out, err := exec.Command(testbroker.Binary(t), "topic", "expand", "e", "--partitions", "2", "--broker", c.brokers[0].Addr).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "must raise the partition count") {
		t.Fatalf("CLI expand to as many: %v\n%s", err, out)
	}
	if parts := owners(t, c.brokers[0].Addr, "e"); len(parts) != 2 {
		t.Fatalf("the topic has %d partitions after refused expansions", len(parts))
	}
}

// TestClusterExpandBrokerPaused: one of two brokers is paused (SIGSTOP) when the topic
// is expanded; the expansion completes (the CLI waits) once the admin placed every
// partition on the live broker and each old partition switched (those of the paused
// broker after they moved); records written before and after read back once, in order.
func TestClusterExpandBrokerPaused(t *testing.T) {
	c := startCluster(t, 2)
	c.createTopic(t, "e", 2)
	b1, b2 := c.brokers[0], c.brokers[1]
	load := expandLoad{producers: 1, keys: 11}
	closed := make(chan struct{})
	close(closed)
	if _, err := load.produce([]string{b1.Addr, b2.Addr}, 0, 500, closed); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(b1.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(b1.Pid(), syscall.SIGCONT)
	out, err := exec.Command(testbroker.Binary(t), "topic", "expand", "e", "--partitions", "4", "--broker", b2.Addr,
		"--timeout", "90s").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "placed and switched") {
		t.Fatalf("expand with a broker paused: %v\n%s", err, out)
	}
	syscall.Kill(b1.Pid(), syscall.SIGCONT)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pr, err := client.NewProducer(ctx, "e", client.Brokers(b2.Addr), client.Linger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for id := 500; id < 1000; id++ {
		if err := pr.Produce(ctx, &client.Record{Key: []byte(load.key(0, id)), Value: expandValue(0, id)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	cs, wg := runChecked([]string{b2.Addr}, load, 1)
	cs[0].mu.Lock()
	cs[0].want[0] = 1000
	cs[0].mu.Unlock()
	wg.Wait()
	if cs[0].err != nil {
		t.Fatal(cs[0].err)
	}
}

// TestClusterExpandDrain: the partition side of a producer's drain, on the wire. Before
// the expansion a producer had two batches on partition 0: the first appended, the
// second not yet sent. After the partition switched, a resend of the first with the old
// version is acknowledged with its original offsets (and durable: C covers it), the
// second is refused with version_mismatch naming the new version, and neither appends.
// The producer's leftovers then go to the new layout: a batch with the new version and
// the next sequence is appended at the switch offset.
func TestClusterExpandDrain(t *testing.T) {
	c := startCluster(t, 1)
	c.createTopic(t, "e", 2)
	w := dial(t, c.brokers[0].Addr)
	waitFor(t, "the partition to take writes", func() bool {
		r := w.call(&wire.ProduceRequest{Topic: []byte("e"), Partition: 0, Version: 1, ProducerID: 77,
			WaitDurableMs: 30000, Batches: records(77, 0, "first", 3)})
		return r.Header.Code == wire.CodeNone
	})
	a, ctx := clusterAdmin(t, c)
	if _, err := a.ExpandTopic(ctx, "e", 4); err != nil {
		t.Fatal(err)
	}
	waitExpandedWire(t, w, 2)
	r := w.call(&wire.ProduceRequest{Topic: []byte("e"), Partition: 0, Version: 1, ProducerID: 77,
		Batches: records(77, 0, "first", 3)})
	mustOK(t, r)
	if pr := r.Body.(*wire.ProduceResponse); pr.BaseOffset != 0 || pr.LastOffset != 2 || pr.Version != 2 || pr.Checkpoint < 2 {
		t.Fatalf("drain of an appended batch: %+v", pr)
	}
	r = w.call(&wire.ProduceRequest{Topic: []byte("e"), Partition: 0, Version: 1, ProducerID: 77,
		Batches: records(77, 3, "second", 2)})
	if pr, _ := r.Body.(*wire.ProduceResponse); r.Header.Code != wire.CodeVersionMismatch || pr == nil || pr.Version != 2 {
		t.Fatalf("drain of a batch never appended: %v %+v", r.Header.Code, r.Body)
	}
	r = w.call(&wire.ProduceRequest{Topic: []byte("e"), Partition: 0, Version: 2, ProducerID: 77,
		Batches: records(77, 3, "second", 2)})
	mustOK(t, r)
	if pr := r.Body.(*wire.ProduceResponse); pr.BaseOffset != 3 {
		t.Fatalf("the first batch of the new layout: %+v", pr)
	}
	if got := fetchValues(t, w, "e", 0, 0); fmt.Sprint(got) != "[first-0 first-1 first-2 second-0 second-1]" {
		t.Fatalf("partition 0 holds %v", got)
	}
}

// waitExpandedWire waits until every partition of layout version v's predecessor
// switched to it.
func waitExpandedWire(t *testing.T, w *wireConn, v uint32) {
	t.Helper()
	waitFor(t, "every old partition to switch", func() bool {
		resp := w.call(&wire.TopicLayoutsRequest{Name: "e"})
		mustOK(t, resp)
		for _, l := range resp.Body.(*wire.TopicLayoutsResponse).Layouts {
			if l.Version == v {
				for _, s := range l.Switches {
					if s < 0 {
						return false
					}
				}
				return true
			}
		}
		return false
	})
}
