package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"sluice/internal/peer/zktest"
)

// Every test here runs against a real ZooKeeper (a standalone server per test).

func dial(t *testing.T, s *zktest.Server, opts ...DialOption) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, []string{s.Addr}, "/sluice", 2*time.Second, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestRegisterAndDeath: a broker's registration is seen by others, and goes when its
// session ends (the watch fires); an unreadable registration (edited by hand) is left
// out, not an error for the rest.
func TestRegisterAndDeath(t *testing.T) {
	s := zktest.Start(t)
	b := dial(t, s)
	if err := b.Register(BrokerInfo{ID: "b1", Addr: "127.0.0.1:9440", Capacity: 1}); err != nil {
		t.Fatal(err)
	}
	admin := dial(t, s)
	if _, err := admin.conn.Create("/sluice/brokers/junk", []byte("{not json"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	brokers, changed, err := admin.BrokersW()
	if err != nil || len(brokers) != 1 || brokers[0].ID != "b1" || brokers[0].Addr != "127.0.0.1:9440" {
		t.Fatalf("brokers %+v, %v", brokers, err)
	}
	b.Close()
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event when the broker's session ended")
	}
	if brokers, err := admin.Brokers(); err != nil || len(brokers) != 0 {
		t.Fatalf("after the broker left: %+v, %v", brokers, err)
	}
}

// TestElection: the first admin leads at once; the second waits, and leads once the
// first is gone.
func TestElection(t *testing.T) {
	s := zktest.Start(t)
	a, b := dial(t, s), dial(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Campaign(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	led := make(chan error, 1)
	go func() { led <- b.Campaign(ctx, "b") }()
	select {
	case err := <-led:
		t.Fatalf("a second admin led while the first lived: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	a.Close()
	if err := <-led; err != nil {
		t.Fatalf("the second admin did not take over: %v", err)
	}
	kids, _, err := b.conn.Children(path.Join("/sluice", "admin", "election"))
	if err != nil || len(kids) != 1 {
		t.Fatalf("candidates %v, %v", kids, err)
	}
}

// proxy forwards TCP to ZooKeeper and can cut every connection (and refuse new ones)
// for a while: the fault injection for a session expiry, which pausing the server does
// not reliably cause (peers README) and which a test cannot do to its own process.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
	return p
}

func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// TestSessionExpiryRegistersAgain: a broker cut off from ZooKeeper past its session
// timeout loses its registration (others see it go), hears of the expiry once it can
// reach ZooKeeper again, and registers again on its new session.
func TestSessionExpiryRegistersAgain(t *testing.T) {
	s := zktest.Start(t)
	px := newProxy(t, s.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := Dial(ctx, []string{px.ln.Addr().String()}, "/sluice", 2*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Register(BrokerInfo{ID: "b1", Addr: "127.0.0.1:9440"}); err != nil {
		t.Fatal(err)
	}
	expired := b.Expired()
	observer := dial(t, s)
	registered := func() bool {
		brokers, err := observer.Brokers()
		if err != nil {
			t.Fatal(err)
		}
		return len(brokers) == 1 && brokers[0].ID == "b1"
	}
	if !registered() {
		t.Fatal("not registered")
	}
	px.setCut(true)
	deadline := time.Now().Add(30 * time.Second)
	for registered() {
		if time.Now().After(deadline) {
			t.Fatal("the registration outlived the session timeout")
		}
		time.Sleep(50 * time.Millisecond)
	}
	px.setCut(false)
	select {
	case <-expired:
	case <-time.After(30 * time.Second):
		t.Fatal("the broker never heard of its session's expiry")
	}
	for !registered() {
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatal("the broker did not register again on its new session")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// owners reads the assignments of topic t, by partition.
func owners(t *testing.T, c *Cluster, topic string, n int) []Owner {
	t.Helper()
	all, err := c.Owners()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]Owner, n)
	for i := range n {
		out[i] = all[PartitionID{topic, i}].Owner
	}
	return out
}

// waitOwners waits until ok holds of topic t's assignments.
func waitOwners(t *testing.T, c *Cluster, topic string, n int, what string, ok func([]Owner) bool) []Owner {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		o := owners(t, c, topic, n)
		if ok(o) {
			return o
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: assignments %+v", what, o)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func perBroker(o []Owner) map[string]int {
	m := map[string]int{}
	for _, x := range o {
		m[x.Broker]++
	}
	return m
}

// TestLeaderPlaces: the leader spreads a topic over the live brokers, moves a dead
// broker's partitions (raising their epoch) and gives a joining broker its share.
func TestLeaderPlaces(t *testing.T) {
	s := zktest.Start(t)
	leader := dial(t, s)
	b1, b2 := dial(t, s), dial(t, s)
	for id, c := range map[string]*Cluster{"b1": b1, "b2": b2} {
		if err := c.Register(BrokerInfo{ID: id, Addr: "127.0.0.1:1", Capacity: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := leader.CreateTopic("t", TopicInfo{Partitions: 4, Version: 1}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := leader.Campaign(ctx, "admin"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- leader.Lead(ctx, Limits{MaxMoves: 2, Slack: 0.1}, 100*time.Millisecond) }()
	first := waitOwners(t, leader, "t", 4, "spread over b1 and b2", func(o []Owner) bool {
		m := perBroker(o)
		return m["b1"] == 2 && m["b2"] == 2
	})
	b2.Close()
	after := waitOwners(t, leader, "t", 4, "b2's partitions to b1", func(o []Owner) bool { return perBroker(o)["b1"] == 4 })
	for i := range first {
		if first[i].Broker == "b2" && after[i].Epoch <= first[i].Epoch {
			t.Fatalf("partition %d moved without a new epoch: %+v -> %+v", i, first[i], after[i])
		}
		if first[i].Broker == "b1" && after[i] != first[i] {
			t.Fatalf("partition %d on a live broker moved: %+v -> %+v", i, first[i], after[i])
		}
	}
	b3 := dial(t, s)
	if err := b3.Register(BrokerInfo{ID: "b3", Addr: "127.0.0.1:2", Capacity: 1}); err != nil {
		t.Fatal(err)
	}
	waitOwners(t, leader, "t", 4, "b3 takes its share", func(o []Owner) bool {
		m := perBroker(o)
		return m["b1"] == 2 && m["b3"] == 2
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Lead returned %v", err)
	}
}

// TestLeaderSurvivesJunk: a topic znode and an assignment znode edited by hand into
// junk: the leader leaves the topic out (its placements stay as they were) and places
// the partition with the junk assignment again; it keeps running.
func TestLeaderSurvivesJunk(t *testing.T) {
	s := zktest.Start(t)
	leader, b1 := dial(t, s), dial(t, s)
	if err := b1.Register(BrokerInfo{ID: "b1", Addr: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"good", "bad"} {
		if err := leader.CreateTopic(name, TopicInfo{Partitions: 2, Version: 1}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- leader.Lead(ctx, Limits{MaxMoves: 2}, 50*time.Millisecond) }()
	for _, topic := range []string{"bad", "good"} {
		waitOwners(t, leader, topic, 2, topic+" placed", func(o []Owner) bool { return o[0].Broker == "b1" && o[1].Broker == "b1" })
	}
	if _, err := leader.conn.Set("/sluice/topics/bad", []byte("{junk"), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.conn.Set("/sluice/assignments/good/1", []byte("not json"), -1); err != nil {
		t.Fatal(err)
	}
	waitOwners(t, leader, "good", 2, "the junk assignment placed again", func(o []Owner) bool { return o[1].Broker == "b1" })
	if o := owners(t, leader, "bad", 2); o[0].Broker != "b1" || o[1].Broker != "b1" {
		t.Fatalf("the unreadable topic's placements changed: %+v", o)
	}
	select {
	case err := <-done:
		t.Fatalf("the leader stopped: %v", err)
	default:
	}
}

// TestLeaderPlacesByLoad: four one-partition topics spread two per broker by count; the
// broker holding two of them reports both busy (50 MiB/s each). The leader moves one
// busy partition to the other broker (only the owner's report counts), tells the
// brokers through the generation, and moves the other from then on only for cause.
func TestLeaderPlacesByLoad(t *testing.T) {
	s := zktest.Start(t)
	leader := dial(t, s)
	brokers := map[string]*Cluster{"b1": dial(t, s), "b2": dial(t, s)}
	for id, c := range brokers {
		if err := c.Register(BrokerInfo{ID: id, Addr: "127.0.0.1:1", Capacity: 1}); err != nil {
			t.Fatal(err)
		}
	}
	topics := []string{"w", "x", "y", "z"}
	for _, n := range topics {
		if err := leader.CreateTopic(n, TopicInfo{Partitions: 1, Version: 1}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := leader.Campaign(ctx, "admin"); err != nil {
		t.Fatal(err)
	}
	go leader.Lead(ctx, Limits{MaxMoves: 2, Slack: 0.2}, 100*time.Millisecond)
	ownerOf := func() map[string]string {
		o, err := leader.Owners()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for pid, x := range o {
			m[pid.Topic] = x.Broker
		}
		return m
	}
	var placed map[string]string
	deadline := time.Now().Add(time.Minute)
	for placed = ownerOf(); len(placed) < 4 || perTopicCount(placed)["b1"] != 2; placed = ownerOf() {
		if time.Now().After(deadline) {
			t.Fatalf("not spread by count: %v", placed)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, gen0, err := leader.conn.Get(leader.root + "/assignments")
	if err != nil {
		t.Fatal(err)
	}
	busy := map[string]PartLoad{}
	var hot []string
	for _, n := range topics {
		if placed[n] == "b1" {
			hot = append(hot, n)
			busy[LoadKey(PartitionID{n, 0})] = PartLoad{BytesPerSec: 50 << 20}
		}
	}
	// b2 claims figures for partitions it does not own: they must not count.
	lies := map[string]PartLoad{LoadKey(PartitionID{hot[0], 0}): {BytesPerSec: 0}, LoadKey(PartitionID{hot[1], 0}): {BytesPerSec: 0}}
	if err := brokers["b2"].UpdateRegistration(BrokerInfo{ID: "b2", Addr: "127.0.0.1:1", Capacity: 1, Partitions: lies}); err != nil {
		t.Fatal(err)
	}
	if err := brokers["b1"].UpdateRegistration(BrokerInfo{ID: "b1", Addr: "127.0.0.1:1", Capacity: 1, Load: 100 << 20, Partitions: busy}); err != nil {
		t.Fatal(err)
	}
	for placed = ownerOf(); placed[hot[0]] == placed[hot[1]]; placed = ownerOf() {
		if time.Now().After(deadline) {
			t.Fatalf("the two busy partitions stay on one broker: %v", placed)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, gen1, err := leader.conn.Get(leader.root + "/assignments")
	if err != nil {
		t.Fatal(err)
	}
	if gen1.Version <= gen0.Version {
		t.Fatalf("assignments changed without a new generation (version %d, then %d)", gen0.Version, gen1.Version)
	}
	time.Sleep(time.Second) // ten passes: nothing more to move
	if again := ownerOf(); fmt.Sprint(again) != fmt.Sprint(placed) {
		t.Fatalf("placement kept moving without cause: %v then %v", placed, again)
	}
}

// perTopicCount counts topics per broker.
func perTopicCount(m map[string]string) map[string]int {
	out := map[string]int{}
	for _, b := range m {
		out[b]++
	}
	return out
}

// TestMoveOnWaitsForTheHolder: a partition moves from b1 to b2 (a broker joined), and
// b2 dies before b1 released it, so b2 never loaded it. The leader moves it on to b3;
// b1 still holds it (it may still take writes and acknowledge them), so b3 must wait for
// b1's release: the assignment names b1 as From. Naming nobody (b2 is dead) would have
// b3 load the partition while b1 still serves it: two writers, and what b1 acknowledges
// after b3 read HDFS's end is fenced by b3's first file, lost.
func TestMoveOnWaitsForTheHolder(t *testing.T) {
	s := zktest.Start(t)
	leader := dial(t, s)
	b1, b2, b3 := dial(t, s), dial(t, s), dial(t, s)
	if err := b1.Register(BrokerInfo{ID: "b1", Addr: "127.0.0.1:1", Capacity: 1}); err != nil {
		t.Fatal(err)
	}
	if err := leader.CreateTopic("t", TopicInfo{Partitions: 2, Version: 1}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := leader.Campaign(ctx, "admin"); err != nil {
		t.Fatal(err)
	}
	go leader.Lead(ctx, Limits{MaxMoves: 2, Slack: 0.1}, 100*time.Millisecond)
	waitOwners(t, leader, "t", 2, "both on b1", func(o []Owner) bool { return perBroker(o)["b1"] == 2 })
	if err := b2.Register(BrokerInfo{ID: "b2", Addr: "127.0.0.1:2", Capacity: 1}); err != nil {
		t.Fatal(err)
	}
	moved := waitOwners(t, leader, "t", 2, "one moved to b2", func(o []Owner) bool { return perBroker(o)["b2"] == 1 })
	p := 0
	if moved[1].Broker == "b2" {
		p = 1
	}
	if moved[p].From != "b1" {
		t.Fatalf("the move from b1 to b2 does not wait for b1: %+v", moved[p])
	}
	if err := b3.Register(BrokerInfo{ID: "b3", Addr: "127.0.0.1:3", Capacity: 1}); err != nil {
		t.Fatal(err)
	}
	b2.Close() // dies before b1 released the partition: b2 never loaded it
	after := waitOwners(t, leader, "t", 2, "b2's partition moved on", func(o []Owner) bool { return o[p].Broker != "b2" && o[p].Epoch > moved[p].Epoch })
	if after[p].Broker != "b1" && after[p].From != "b1" {
		t.Fatalf("the partition moved on to %s without waiting for b1, which still holds it: %+v", after[p].Broker, after[p])
	}
}

// TestHolderAfterFromCameBack: an assignment that still names the broker it moves from
// (From) names the holder of the partition only while From has stayed registered since
// the assignment was written. A From that lost its session in between gave everything
// up, and the assigned broker may have loaded the partition meanwhile: that broker is
// the holder then, and the next move must wait for it, not for From.
func TestHolderAfterFromCameBack(t *testing.T) {
	s := zktest.Start(t)
	leader, b1, b2 := dial(t, s), dial(t, s), dial(t, s)
	for i, b := range []*Cluster{b1, b2} {
		if err := b.Register(BrokerInfo{ID: fmt.Sprintf("b%d", i+1), Addr: fmt.Sprintf("127.0.0.1:%d", i+1), Capacity: 1}); err != nil {
			t.Fatal(err)
		}
	}
	pid := PartitionID{Topic: "h", ID: 0}
	if err := leader.setOwner(pid, Owner{Broker: "b2", Epoch: 5, From: "b1"}, -1); err != nil {
		t.Fatal(err)
	}
	holder := func() string {
		t.Helper()
		o, err := leader.Owner(pid)
		if err != nil {
			t.Fatal(err)
		}
		brokers, err := leader.Brokers()
		if err != nil {
			t.Fatal(err)
		}
		since := map[string]int64{}
		for _, b := range brokers {
			since[b.ID] = b.Since
		}
		h, err := leader.holder(pid, o, since)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if h := holder(); h != "b1" {
		t.Fatalf("holder %q while b1 has not released the partition, want b1", h)
	}
	b1.Close() // its session ends: b2 may load the partition now
	again := dial(t, s)
	if err := again.Register(BrokerInfo{ID: "b1", Addr: "127.0.0.1:1", Capacity: 1}); err != nil {
		t.Fatal(err)
	}
	if h := holder(); h != "b2" {
		t.Fatalf("holder %q after b1 came back on a new session, want b2 (which may have loaded it)", h)
	}
}

// TestNewLeaderRepairsJunkFromReports: a leader that takes over after an assignment was
// damaged by hand has no memory of it; it takes the holder and its epoch from the
// brokers' load reports and writes the assignment again as it was, so the partition does
// not move away from a broker still serving it (without waiting for its release).
func TestNewLeaderRepairsJunkFromReports(t *testing.T) {
	s := zktest.Start(t)
	first, b1, b2 := dial(t, s), dial(t, s), dial(t, s)
	for i, b := range []*Cluster{b1, b2} {
		if err := b.Register(BrokerInfo{ID: fmt.Sprintf("b%d", i+1), Addr: fmt.Sprintf("127.0.0.1:%d", i+1), Capacity: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := first.CreateTopic("j", TopicInfo{Partitions: 2, Version: 1}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := first.Campaign(ctx, "first"); err != nil {
		t.Fatal(err)
	}
	led := make(chan error, 1)
	go func() { led <- first.Lead(ctx, Limits{MaxMoves: 2, Slack: 0.1}, 50*time.Millisecond) }()
	placed := waitOwners(t, first, "j", 2, "one partition per broker", func(o []Owner) bool {
		return perBroker(o)["b1"] == 1 && perBroker(o)["b2"] == 1
	})
	cancel()
	<-led
	first.Close()

	// As if it had moved a few times: an epoch a fresh placement would not give.
	placed[0].Epoch = 7
	if _, err := b1.conn.Set("/sluice/assignments/j/0", mustJSON(t, placed[0]), -1); err != nil {
		t.Fatal(err)
	}
	holder := map[string]*Cluster{"b1": b1, "b2": b2}[placed[0].Broker]
	report := BrokerInfo{ID: placed[0].Broker, Addr: "127.0.0.1:9", Capacity: 1,
		Partitions: map[string]PartLoad{"j/0": {Epoch: placed[0].Epoch}}}
	if err := holder.UpdateRegistration(report); err != nil {
		t.Fatal(err)
	}
	second := dial(t, s)
	if _, err := second.conn.Set("/sluice/assignments/j/0", []byte("not json"), -1); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	if err := second.Campaign(ctx2, "second"); err != nil {
		t.Fatal(err)
	}
	go second.Lead(ctx2, Limits{MaxMoves: 2, Slack: 0.1}, 50*time.Millisecond)
	got := waitOwners(t, second, "j", 2, "the damaged assignment written again", func(o []Owner) bool { return o[0].Broker != "" })
	if got[0] != placed[0] {
		t.Fatalf("the damaged assignment was written as %+v, want it as it was, %+v", got[0], placed[0])
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
