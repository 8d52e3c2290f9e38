package test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sluice/client"
	"sluice/internal/peer/hdfstest"
	"sluice/internal/peer/zktest"
	"sluice/wire"
)

// zkProxy stands between a broker and ZooKeeper, forwarding both ways. Armed, it breaks
// the connection that carries the first create of a switch znode
// (ROOT/topics/T/switch/V/P) right after ZooKeeper has taken it, before the answer
// reaches the broker: the create happened, and the broker learns only that the
// connection closed (go-zookeeper answers ErrConnectionClosed). Its session goes on over
// the next connection. Cut (SetCut), it closes every connection and refuses new ones:
// the broker is cut off from ZooKeeper, as by a network partition, while it serves on.
type zkProxy struct {
	ln       net.Listener
	upstream string
	armed    atomic.Bool
	fired    chan struct{}
	once     sync.Once
	wg       sync.WaitGroup

	mu struct {
		sync.Mutex
		cut   bool
		conns map[net.Conn]bool // the clients' ends, open
	}
}

var switchZnode = regexp.MustCompile(`/switch/[0-9]+/[0-9]+$`)

func startZKProxy(t *testing.T, upstream string) *zkProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	px := &zkProxy{ln: ln, upstream: upstream, fired: make(chan struct{})}
	px.mu.conns = map[net.Conn]bool{}
	px.wg.Add(1)
	go func() {
		defer px.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			px.mu.Lock()
			if px.mu.cut {
				px.mu.Unlock()
				c.Close()
				continue
			}
			px.mu.conns[c] = true
			px.mu.Unlock()
			px.wg.Add(1)
			go func() {
				defer px.wg.Done()
				px.serve(c)
				px.mu.Lock()
				delete(px.mu.conns, c)
				px.mu.Unlock()
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		px.SetCut(true)
		px.wg.Wait()
	})
	return px
}

func (px *zkProxy) Addr() string { return px.ln.Addr().String() }

// SetCut cuts the broker off from ZooKeeper (every connection closed, new ones refused)
// or, with false, lets it connect again.
func (px *zkProxy) SetCut(cut bool) {
	px.mu.Lock()
	defer px.mu.Unlock()
	px.mu.cut = cut
	if cut {
		for c := range px.mu.conns {
			c.Close()
		}
	}
}

// serve forwards one connection: the server's answers as they come, the client's
// requests frame by frame (a 4-byte big-endian length, then xid, opcode and, for a
// create, the path), the first frame being the session's connect request.
func (px *zkProxy) serve(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", px.upstream)
	if err != nil {
		return
	}
	defer up.Close()
	var dropping atomic.Bool // the server's answers are dropped from the trigger on
	go func() {
		defer c.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := up.Read(buf)
			if n > 0 && !dropping.Load() {
				if _, err := c.Write(buf[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for first := true; ; first = false {
		var n [4]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(n[:]))
		if _, err := io.ReadFull(c, body); err != nil {
			return
		}
		if !first && px.armed.Load() && len(body) >= 12 && binary.BigEndian.Uint32(body[4:8]) == 1 { // create
			plen := int(binary.BigEndian.Uint32(body[8:12]))
			if 12+plen <= len(body) && switchZnode.Match(body[12:12+plen]) && px.armed.CompareAndSwap(true, false) {
				dropping.Store(true)
				if _, err := up.Write(append(n[:], body...)); err != nil {
					return
				}
				time.Sleep(20 * time.Millisecond) // ZooKeeper applies it and answers; the answer is dropped
				px.once.Do(func() { close(px.fired) })
				return
			}
		}
		if _, err := up.Write(append(n[:], body...)); err != nil {
			return
		}
	}
}

// switchLog returns the lines of a broker's log about switches.
func switchLog(log string) string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "switch") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestClusterExpandSwitchAnswerLost: a broker's create of a partition's switch znode
// reaches ZooKeeper, but the connection breaks before the answer comes back. The
// switch is recorded at the offset where the partition froze, so the partition must not
// append anything more of the old layout there: it completes its switch at that offset
// (the next attempt finds its own record) and then takes the new version's writes,
// whose first record lands at the recorded switch offset.
func TestClusterExpandSwitchAnswerLost(t *testing.T) {
	zs := zktest.Start(t)
	c := &cluster{zk: zs, hdfs: hdfstest.Start(t)}
	c.addAdmin(t)
	px := startZKProxy(t, zs.Addr)
	b := c.addBrokerVia(t, px.Addr())
	c.createTopic(t, "e", 2)

	// Writers of the old layout on both partitions, until a partition says version 2.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for part := range uint32(2) {
		w := dial(t, b.Addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := w.call(&wire.ProduceRequest{Topic: []byte("e"), Partition: part, Version: 1, Batches: records(0, -1, "old", 2)})
				if r.Header.Code == wire.CodeVersionMismatch {
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	dw := dial(t, b.Addr)
	waitFor(t, "both partitions to take writes", func() bool {
		for part := range uint32(2) {
			resp := dw.call(&wire.DescribeTopicRequest{Name: "e"})
			mustOK(t, resp)
			if resp.Body.(*wire.DescribeTopicResponse).Partitions[part].NextOffset < 10 {
				return false
			}
		}
		return true
	})
	// The switches' directory exists already, so that the first create of a switch znode
	// is the one that records it.
	zs.Create(t, "/sluice/topics/e/switch", "")
	zs.Create(t, "/sluice/topics/e/switch/2", "")
	px.armed.Store(true)
	a, ctx := clusterAdmin(t, c)
	if _, err := a.ExpandTopic(ctx, "e", 4); err != nil {
		t.Fatal(err)
	}
	select {
	case <-px.fired:
	case <-time.After(time.Minute):
		t.Fatal("no switch znode was created")
	}
	w := dial(t, b.Addr)
	waitFor(t, "the broker to learn that its create failed", func() bool {
		return strings.Contains(b.Log(), "cannot record a partition's switch")
	})
	var switches []int64
	waitFor(t, "every old partition to record its switch", func() bool {
		resp := w.call(&wire.TopicLayoutsRequest{Name: "e"})
		if resp.Header.Code != wire.CodeNone { // (ZooKeeper reconnecting)
			return false
		}
		ls := resp.Body.(*wire.TopicLayoutsResponse).Layouts
		if len(ls) < 2 || ls[1].Switches[0] < 0 || ls[1].Switches[1] < 0 {
			return false
		}
		switches = ls[1].Switches
		return true
	})
	for part := range uint32(2) {
		var r *wire.Response
		deadline := time.Now().Add(30 * time.Second)
		for {
			r = w.call(&wire.ProduceRequest{Topic: []byte("e"), Partition: part, Version: 2, Batches: records(0, -1, "new", 1)})
			if r.Header.Code == wire.CodeNone || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if r.Header.Code != wire.CodeNone {
			t.Fatalf("partition %d (switch recorded at %d) takes no writes of version 2: %v %s\nbroker log:\n%s", part,
				switches[part], r.Header.Code, r.Text, switchLog(b.Log()))
		}
		if base := r.Body.(*wire.ProduceResponse).BaseOffset; base != switches[part] {
			t.Fatalf("partition %d: its switch is recorded at %d, its first record of version 2 is at %d", part,
				switches[part], base)
		}
	}
}

// TestClusterExpandBrokerKilledWhileSwitching: keyed producers run while HDFS is paused,
// so that no old partition can switch (C cannot cover its freeze offset); the topic is
// expanded, and the broker holding partition 0 is killed (kill -9) while its partitions
// wait frozen. HDFS resumes: the survivor loads partition 0 and records its load point
// as the switch (nothing recorded it), and the producers' records the killed broker had
// accepted but not persisted are drained, refused and routed again. Afterwards every
// record is read once, each key's records in order. (The consumers read once everything
// is persisted: one reading through the kill would have read records above C that the
// kill lost, whose offsets then hold others.)
func TestClusterExpandBrokerKilledWhileSwitching(t *testing.T) {
	c := startCluster(t, 2)
	c.createTopic(t, "e", 2)
	parts := owners(t, c.brokers[0].Addr, "e")
	victim, survivor := c.brokers[0], c.brokers[1]
	if parts[0] != victim.Addr {
		victim, survivor = survivor, victim
	}
	addrs := []string{c.brokers[0].Addr, c.brokers[1].Addr}
	load := expandLoad{producers: 2, keys: 13}
	stop := make(chan struct{})
	counts := make([]int, load.producers)
	perrs := make([]error, load.producers)
	var pwg sync.WaitGroup
	for p := range load.producers {
		pwg.Add(1)
		go func() { defer pwg.Done(); counts[p], perrs[p] = load.produce(addrs, p, 2000, stop) }()
	}
	time.Sleep(2 * time.Second)
	c.hdfs.Pause()
	resumed := false
	defer func() {
		if !resumed {
			c.hdfs.Resume()
		}
	}()
	time.Sleep(300 * time.Millisecond) // records accepted that HDFS does not have
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a2, err := client.NewAdmin(client.Brokers(survivor.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	if _, err := a2.ExpandTopic(ctx, "e", 4); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // both old partitions frozen, waiting for C
	ls, err := a2.TopicLayouts(ctx, "e")
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 2 || ls[1].Switches[0] >= 0 {
		t.Fatalf("partition 0 switched with HDFS paused: %+v", ls)
	}
	victim.Kill()
	time.Sleep(500 * time.Millisecond)
	c.hdfs.Resume()
	resumed = true
	waitFor(t, "every old partition to record its switch", func() bool {
		ls, err := a2.TopicLayouts(ctx, "e")
		return err == nil && len(ls) == 2 && ls[1].Switches[0] >= 0 && ls[1].Switches[1] >= 0
	})
	// The survivor's load of partition 0 recorded its switch, at the load point.
	ls, err = a2.TopicLayouts(ctx, "e")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`msg=loaded topic=e partition=0 .* next=([0-9]+)`).FindStringSubmatch(survivor.Log())
	if m == nil || m[1] != fmt.Sprint(ls[1].Switches[0]) {
		t.Fatalf("partition 0 switched at %d; the survivor's load: %v", ls[1].Switches[0], m)
	}
	time.Sleep(2 * time.Second) // the load goes on in the new layout
	close(stop)
	pwg.Wait()
	for p, err := range perrs {
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("producer %d wrote %d records", p, counts[p])
	}
	after, awg := runChecked([]string{survivor.Addr}, load, 1)
	after[0].mu.Lock()
	copy(after[0].want, counts)
	after[0].mu.Unlock()
	awg.Wait()
	if after[0].err != nil {
		t.Fatalf("consumer: %v (read %v of %v)", after[0].err, after[0].got, counts)
	}
}

// TestClusterExpandTwiceQuickly: under keyed load with two consumers reading, the topic
// is expanded from 2 to 3 partitions and, as soon as the old partitions switched, again
// to 5, then to 8. Every record is read once by every consumer, each key's records in
// order. With unplaced, no admin runs during the first two expansions: partition 2, new
// in the second layout, is placed only after the third was written, so its segment of
// the second layout is empty and its switch to the third is recorded at its load; the
// producers' records for it wait and are routed again.
func TestClusterExpandTwiceQuickly(t *testing.T) {
	for _, unplaced := range []bool{false, true} {
		t.Run(fmt.Sprintf("unplaced=%v", unplaced), func(t *testing.T) { expandTwiceQuickly(t, unplaced) })
	}
}

func expandTwiceQuickly(t *testing.T, unplaced bool) {
	c := startCluster(t, 2)
	c.createTopic(t, "e", 2)
	addrs := []string{c.brokers[0].Addr, c.brokers[1].Addr}
	load := expandLoad{producers: 2, keys: 19}
	consumers, cwg := runChecked(addrs, load, 2)
	stop := make(chan struct{})
	counts := make([]int, load.producers)
	perrs := make([]error, load.producers)
	var pwg sync.WaitGroup
	for p := range load.producers {
		pwg.Add(1)
		go func() { defer pwg.Done(); counts[p], perrs[p] = load.produce(addrs, p, 2000, stop) }()
	}
	time.Sleep(2 * time.Second)
	if unplaced {
		c.admins[0].Process.Kill()
	}
	a, ctx := clusterAdmin(t, c)
	for k, n := range []int{3, 5, 8} {
		if unplaced && n == 8 {
			c.addAdmin(t) // places partitions 2, 3 and 4; the third expansion waits for 2's switch
		}
		for {
			_, err := a.ExpandTopic(ctx, "e", n)
			if err == nil {
				break
			}
			if !client.IsCode(err, wire.CodeTopicChanged) || ctx.Err() != nil {
				t.Fatalf("expand to %d: %v", n, err)
			}
			time.Sleep(5 * time.Millisecond) // the last expansion's switches are not all recorded yet
		}
		t.Logf("expanded to %d (version %d)", n, k+2)
	}
	time.Sleep(3 * time.Second) // the load goes on in the last layout
	stopLoad(t, stop, &pwg, counts, perrs, consumers, cwg)
	after, awg := runChecked(addrs, load, 1)
	after[0].mu.Lock()
	copy(after[0].want, counts)
	after[0].mu.Unlock()
	awg.Wait()
	if after[0].err != nil {
		t.Fatalf("consumer started after the expansions: %v", after[0].err)
	}
	resp := dial(t, addrs[0]).call(&wire.TopicLayoutsRequest{Name: "e"})
	mustOK(t, resp)
	t.Logf("layouts %+v", resp.Body.(*wire.TopicLayoutsResponse).Layouts)
}

// TestClusterExpandConsumersStartMidway: consumers that start while an expansion is
// under way (HDFS paused: the old partitions are frozen, their switches unknown, the
// producers draining) from the oldest record, at a time before every record, from the
// newest record and at an offset read on through it: each reads every record after its
// start once, each key's records in order.
func TestClusterExpandConsumersStartMidway(t *testing.T) {
	c := startCluster(t, 2)
	c.createTopic(t, "e", 2)
	addrs := []string{c.brokers[0].Addr, c.brokers[1].Addr}
	load := expandLoad{producers: 2, keys: 23}
	stop := make(chan struct{})
	counts := make([]int, load.producers)
	perrs := make([]error, load.producers)
	var pwg sync.WaitGroup
	begin := time.Now().Add(-time.Second)
	for p := range load.producers {
		pwg.Add(1)
		go func() { defer pwg.Done(); counts[p], perrs[p] = load.produce(addrs, p, 2000, stop) }()
	}
	time.Sleep(2 * time.Second)
	c.hdfs.Pause()
	resumed := false
	defer func() {
		if !resumed {
			c.hdfs.Resume()
		}
	}()
	a, ctx := clusterAdmin(t, c)
	if _, err := a.ExpandTopic(ctx, "e", 5); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // frozen, the producers draining
	var cwg sync.WaitGroup
	cs := []*checked{
		runCheckedFrom(addrs, load, client.Oldest(), false, &cwg),
		runCheckedFrom(addrs, load, client.AtTime(begin), false, &cwg),
		runCheckedFrom(addrs, load, client.Newest(), true, &cwg),
		runCheckedFrom(addrs, load, client.AtOffset(1000), true, &cwg),
	}
	time.Sleep(time.Second)
	c.hdfs.Resume()
	resumed = true
	time.Sleep(3 * time.Second) // the load goes on in the new layout
	stopLoad(t, stop, &pwg, counts, perrs, cs, &cwg)
}
