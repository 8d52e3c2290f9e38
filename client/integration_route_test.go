package client_test

import (
	"context"
	"testing"
	"time"

	"sluice/client"
	"sluice/internal/testbroker"
)

// TestProducerRidesOutStaleRoute: the broker a producer writes to dies and another
// broker, which does not know the topic, comes up on its address (a partition moved, a
// port reused). The producer treats unknown_topic there as a stale route: it refreshes
// and retries instead of failing, and once the topic exists on the new broker its
// records are persisted there.
func TestProducerRidesOutStaleRoute(t *testing.T) {
	a := startBroker(t)
	createTopic(t, a.Addr, "m", 1)
	p := newProducer(t, a.Addr, "m", client.Linger(time.Millisecond))
	ctx := ctxFor(t, time.Minute)
	for i := range 10 {
		if err := p.Produce(ctx, &client.Record{Value: value(uint64(i), 16)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.WaitPersisted(ctx); err != nil {
		t.Fatal(err)
	}
	a.Kill()
	b := testbroker.Start(t, t.TempDir(), "-listen", a.Addr) // the same address, another broker
	done := make(chan error, 1)
	go func() {
		for i := 10; i < 20; i++ {
			if err := p.Produce(ctx, &client.Record{Value: value(uint64(i), 16)}); err != nil {
				done <- err
				return
			}
		}
		done <- p.WaitPersisted(ctx)
	}()
	select {
	case err := <-done:
		t.Fatalf("the producer finished before the topic existed on the new broker: %v", err)
	case <-time.After(time.Second): // it retries meanwhile
	}
	createTopic(t, b.Addr, "m", 1)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the producer gave up on a stale route: %v", err)
		}
	case <-wctx.Done():
		t.Fatal("the producer did not get its records persisted on the new broker")
	}
	closeProducer(t, p)
	got := consumeAll(t, b.Addr, "m", 10)
	seen := map[uint64]bool{}
	for _, r := range got {
		seen[r.id] = true
	}
	for i := uint64(10); i < 20; i++ {
		if !seen[i] {
			t.Fatalf("record %d missing on the new broker (read %d records)", i, len(got))
		}
	}
}
