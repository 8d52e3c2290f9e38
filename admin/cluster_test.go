package admin

import (
	"context"
	"path"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"sluice/internal/peer/zktest"
)

// Every test here runs against a real ZooKeeper (a standalone server per test).

func dial(t *testing.T, s *zktest.Server) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, []string{s.Addr}, "/sluice", 2*time.Second, nil)
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
	brokers, changed, err := admin.Brokers()
	if err != nil || len(brokers) != 1 || brokers[0].ID != "b1" || brokers[0].Addr != "127.0.0.1:9440" {
		t.Fatalf("brokers %+v, %v", brokers, err)
	}
	b.Close()
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event when the broker's session ended")
	}
	if brokers, _, err := admin.Brokers(); err != nil || len(brokers) != 0 {
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
