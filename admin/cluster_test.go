package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"sluice/internal/peer/zktest"
)

// Every test here runs against a real ZooKeeper (a standalone server per test).

func dial(t *testing.T, s *zktest.Server, opts ...DialOption) *Cluster {
	t.Helper()
	return dialLog(t, s, nil, opts...)
}

// dialLogged is dial with the session's log kept for the test to read.
func dialLogged(t *testing.T, s *zktest.Server) (*Cluster, *lockedBuf) {
	t.Helper()
	var log lockedBuf
	return dialLog(t, s, slog.New(slog.NewTextHandler(&log, nil))), &log
}

func dialLog(t *testing.T, s *zktest.Server, log *slog.Logger, opts ...DialOption) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, []string{s.Addr}, "/sluice", 2*time.Second, log, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestRegisterAndDeath: a broker's registration is seen by others, and goes when its
// session ends (the watch fires); an unreadable registration (edited by hand) is not an
// error for the rest, and its broker, whose session lives, is listed as Unreadable.
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
	if err != nil || len(brokers) != 2 || brokers[0].ID != "b1" || brokers[0].Addr != "127.0.0.1:9440" ||
		brokers[1].ID != "junk" || !brokers[1].Unreadable || brokers[1].Since == 0 {
		t.Fatalf("brokers %+v, %v", brokers, err)
	}
	if err := admin.conn.Delete("/sluice/brokers/junk", -1); err != nil {
		t.Fatal(err)
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

// TestElectionIgnoresJunk: children of the election made by hand, which no admin's
// session will ever remove: names that sort before the candidates' ("aaa"), that are no
// candidate's ("n_junk"), and a persistent one named like a candidate that sorts first.
// Each is ignored and logged once: the first admin leads at once (before, it waited for
// good on the junk before it), and the second takes over when the first is gone.
func TestElectionIgnoresJunk(t *testing.T) {
	s := zktest.Start(t)
	a, log := dialLogged(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	junk := []string{"aaa", "n_junk", "n_0000000000"}
	for _, k := range junk {
		if _, err := a.conn.Create("/sluice/admin/election/"+k, []byte("{}"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	first, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if err := a.Campaign(first, "a"); err != nil {
		t.Fatalf("the only admin does not lead with junk in the election: %v", err)
	}
	for _, k := range junk {
		if n := strings.Count(log.String(), "znode=/sluice/admin/election/"+k+"\n"); n != 1 {
			t.Fatalf("%s logged %d times, want once:\n%s", k, n, log.String())
		}
	}
	b := dial(t, s)
	led := make(chan error, 1)
	go func() { led <- b.Campaign(ctx, "b") }()
	a.Close()
	if err := <-led; err != nil {
		t.Fatalf("the second admin did not take over: %v", err)
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
// junk: the leader takes the topic as last read (its placements stay as they were) and
// places the partition with the junk assignment again; it keeps running.
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
	// The leader bumps the generation after a pass's writes (deferred), so the owners can
	// be seen before it: wait for the bump of the first placement.
	gen0 := generationAtLeast(t, leader, 1, deadline)
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
	// Fails at the deadline if the move never told the brokers through a new generation.
	generationAtLeast(t, leader, gen0+1, deadline)
	time.Sleep(time.Second) // ten passes: nothing more to move
	if again := ownerOf(); fmt.Sprint(again) != fmt.Sprint(placed) {
		t.Fatalf("placement kept moving without cause: %v then %v", placed, again)
	}
}

// generationAtLeast waits until the assignments znode's version reaches v and returns
// it, failing the test at deadline.
func generationAtLeast(t *testing.T, c *Cluster, v int32, deadline time.Time) int32 {
	t.Helper()
	for {
		_, st, err := c.conn.Get(c.root + "/assignments")
		if err != nil {
			t.Fatal(err)
		}
		if st.Version >= v {
			return st.Version
		}
		if time.Now().After(deadline) {
			t.Fatalf("the assignments' generation stays at version %d, below %d: changed without telling the brokers", st.Version, v)
		}
		time.Sleep(20 * time.Millisecond)
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
	first, bs := dial(t, s), registered(t, s, 2)
	b1, b2 := bs[0], bs[1]
	if err := first.CreateTopic("j", TopicInfo{Partitions: 2, Version: 1}); err != nil {
		t.Fatal(err)
	}
	stop := lead(t, first, "first", 50*time.Millisecond)
	placed := waitOwners(t, first, "j", 2, "one partition per broker", func(o []Owner) bool {
		return perBroker(o)["b1"] == 1 && perBroker(o)["b2"] == 1
	})
	stop()
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
	lead(t, second, "second", 50*time.Millisecond)
	got := waitOwners(t, second, "j", 2, "the damaged assignment written again", func(o []Owner) bool { return o[0].Broker != "" })
	if got[0] != placed[0] {
		t.Fatalf("the damaged assignment was written as %+v, want it as it was, %+v", got[0], placed[0])
	}
}

// TestJunkRegistrationStaysLive: a live broker's registration edited by hand into junk
// does not make the leader take it for dead. The leader that read it good keeps it as it
// was: its partitions stay (same broker, same epoch). A new leader, which never read it
// good, also leaves its partitions where they are and gives it no new ones. The broker
// is still the holder of its partitions for a move (the new owner waits for its
// release): before, it was left out, its partitions moved at once and the new owners
// loaded them without waiting, while it still held them under a valid lease.
func TestJunkRegistrationStaysLive(t *testing.T) {
	s := zktest.Start(t)
	first, b1 := dial(t, s), registered(t, s, 2)[0]
	if err := first.CreateTopic("t", TopicInfo{Partitions: 4, Version: 1}); err != nil {
		t.Fatal(err)
	}
	stop := lead(t, first, "first", 20*time.Millisecond)
	placed := waitOwners(t, first, "t", 4, "two partitions per broker", func(o []Owner) bool {
		return perBroker(o)["b1"] == 2 && perBroker(o)["b2"] == 2
	})
	if _, err := b1.conn.Set("/sluice/brokers/b2", []byte("{junk"), -1); err != nil {
		t.Fatal(err)
	}
	waitPasses(t, first, 5)
	if got := owners(t, first, "t", 4); fmt.Sprint(got) != fmt.Sprint(placed) {
		t.Fatalf("the leader moved a live broker's partitions for a junk registration: %+v, then %+v", placed, got)
	}
	if n := first.Stats().UnreadableBrokers; n != 1 {
		t.Fatalf("%d unreadable registrations in the leader's figures, want 1", n)
	}
	stop()
	first.Close()

	second := dial(t, s)
	lead(t, second, "second", 20*time.Millisecond)
	if err := second.CreateTopic("n", TopicInfo{Partitions: 4, Version: 1}); err != nil {
		t.Fatal(err)
	}
	waitOwners(t, second, "n", 4, "the new topic placed on b1 only", func(o []Owner) bool { return perBroker(o)["b1"] == 4 })
	waitPasses(t, second, 5)
	if got := owners(t, second, "t", 4); fmt.Sprint(got) != fmt.Sprint(placed) {
		t.Fatalf("a new leader moved the partitions of a broker it cannot read: %+v, then %+v", placed, got)
	}
	brokers, err := second.Brokers()
	if err != nil {
		t.Fatal(err)
	}
	since := map[string]int64{}
	for _, b := range brokers {
		since[b.ID] = b.Since
	}
	for i, o := range placed {
		pid := PartitionID{"t", i}
		got, err := second.Owner(pid)
		if err != nil {
			t.Fatal(err)
		}
		if h, err := second.holder(pid, got, since); err != nil || h != o.Broker {
			t.Fatalf("holder of %v is %q (%v), want %s, which serves it", pid, h, err, o.Broker)
		}
	}
}

// TestJunkTopicKeepsPlacing: a topic znode edited by hand into junk. The leader that
// read it good goes on placing the topic as last read: a dead broker's partition moves
// on (before, the topic was left out and the partition stayed on the dead broker). The
// junk is logged once per write of it, not on every pass. A new leader, which never
// read it good, leaves its assignments as they are (a broker that joins gets none of
// them, none is deleted) and counts it in its figures.
func TestJunkTopicKeepsPlacing(t *testing.T) {
	s := zktest.Start(t)
	first, log := dialLogged(t, s)
	bs := registered(t, s, 2)
	if err := first.CreateTopic("bad", TopicInfo{Partitions: 2, Version: 1}); err != nil {
		t.Fatal(err)
	}
	stop := lead(t, first, "first", 20*time.Millisecond)
	waitOwners(t, first, "bad", 2, "one partition per broker", func(o []Owner) bool { return perBroker(o)["b2"] == 1 })
	logged := func(n int) {
		t.Helper()
		waitPasses(t, first, 5)
		if got := strings.Count(log.String(), `msg="unreadable topic znode`); got != n {
			t.Fatalf("the junk topic logged %d times, want %d (once per write):\n%s", got, n, log.String())
		}
		if got := first.Stats().UnreadableTopics; got != 1 {
			t.Fatalf("%d unreadable topics in the leader's figures, want 1", got)
		}
	}
	for i, junk := range []string{"{junk", "{more junk"} {
		if _, err := first.conn.Set("/sluice/topics/bad", []byte(junk), -1); err != nil {
			t.Fatal(err)
		}
		logged(i + 1)
	}
	bs[1].Close()
	moved := waitOwners(t, first, "bad", 2, "the dead broker's partition placed again", func(o []Owner) bool {
		return perBroker(o)["b1"] == 2
	})
	stop()
	first.Close()

	b3 := dial(t, s)
	if err := b3.Register(BrokerInfo{ID: "b3", Addr: "127.0.0.1:3", Capacity: 1}); err != nil {
		t.Fatal(err)
	}
	second := dial(t, s)
	lead(t, second, "second", 20*time.Millisecond)
	waitPasses(t, second, 5)
	if got := owners(t, second, "bad", 2); fmt.Sprint(got) != fmt.Sprint(moved) {
		t.Fatalf("a leader that never read the topic changed its assignments: %+v, then %+v", moved, got)
	}
	if got := second.Stats().UnreadableTopics; got != 1 {
		t.Fatalf("%d unreadable topics in the new leader's figures, want 1", got)
	}
}

// lockedBuf is a log's output, safe to read while it is written.
type lockedBuf struct {
	mu struct {
		sync.Mutex
		b bytes.Buffer
	}
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.b.String()
}

// registered returns n brokers' sessions, registered as b1, b2, ... (capacity 1).
func registered(t *testing.T, s *zktest.Server, n int) []*Cluster {
	t.Helper()
	out := make([]*Cluster, n)
	for i := range out {
		out[i] = dial(t, s)
		if err := out[i].Register(BrokerInfo{ID: fmt.Sprintf("b%d", i+1), Addr: fmt.Sprintf("127.0.0.1:%d", i+1), Capacity: 1}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// lead makes c the leader and runs its placement (MaxMoves 2, slack 0.1) until stop is
// called or the test ends; stop returns once Lead did.
func lead(t *testing.T, c *Cluster, id string, interval time.Duration) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.Campaign(ctx, id); err != nil {
		cancel()
		t.Fatal(err)
	}
	led := make(chan error, 1)
	go func() { led <- c.Lead(ctx, Limits{MaxMoves: 2, Slack: 0.1}, interval) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-led }) }
	t.Cleanup(stop)
	return stop
}

// waitPasses waits until the leader c has run n more placement passes.
func waitPasses(t *testing.T, c *Cluster, n uint64) {
	t.Helper()
	from := c.Stats().Passes
	deadline := time.Now().Add(30 * time.Second)
	for c.Stats().Passes < from+n {
		if time.Now().After(deadline) {
			t.Fatalf("the leader ran %d passes in 30 s, want %d", c.Stats().Passes-from, n)
		}
		time.Sleep(10 * time.Millisecond)
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
