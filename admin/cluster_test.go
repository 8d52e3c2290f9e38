package admin

import (
	"context"
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
		brokers, _, err := observer.Brokers()
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
