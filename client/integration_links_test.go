package client_test

import (
	"net"
	"testing"
	"time"

	"sluice/client"
)

// TestIdleLinkRetired: a producer first told a dead address for its partition, then the
// broker's, ends with one sender: the link to the dead address stops once no partition
// uses it. Before, it redialed until Close, and asked for the metadata every third
// failure, for every address the producer had ever been given.
func TestIdleLinkRetired(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b.Addr, "moved", 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // refused from now on
	proxy := startMetaProxy(t, b.Addr, func(n, _ int) string {
		if n == 0 {
			return dead
		}
		return b.Addr
	})
	p := newProducer(t, proxy.Addr(), "moved", client.RetryBackoff(time.Millisecond, 20*time.Millisecond))
	ctx := ctxFor(t, 60*time.Second)
	if _, err := p.ProduceSync(ctx, &client.Record{Value: []byte("v")}, client.AckPersisted); err != nil {
		t.Fatal(err)
	}
	if n := client.Links(p); n != 1 {
		t.Fatalf("%d senders once the partition left the dead address, want 1", n)
	}
	closeProducer(t, p)
}
