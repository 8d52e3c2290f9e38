package client_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"sluice/client"
)

// TestPollBeforeNextEnds: an application that takes one record per Poll (a Poll while
// the answer still has records) reads every record once, in order: Poll keeps the
// answer it has not finished. Before, the rest of the answer was dropped while the
// fetchers had already asked for what follows it: those records were never read (the
// next answers began past them, or found a gap).
func TestPollBeforeNextEnds(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b.Addr, "onebyone", 1)
	p := newProducer(t, b.Addr, "onebyone")
	ctx := ctxFor(t, 60*time.Second)
	const n = 50
	for i := range n { // a batch each: answers of several batches
		if _, err := p.ProduceSync(ctx, &client.Record{Value: value(uint64(i), 16)}, client.AckAccepted); err != nil {
			t.Fatal(err)
		}
	}
	closeProducer(t, p)
	c, err := client.NewConsumer(ctx, "onebyone", client.Brokers(b.Addr), client.Start(client.Oldest()),
		client.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for want := uint64(0); want < n; {
		if err := c.Poll(ctx); err != nil {
			t.Fatalf("poll after %d records: %v", want, err)
		}
		if !c.Next() {
			if err := c.Err(); err != nil {
				t.Fatalf("after %d records: %v", want, err)
			}
			continue
		}
		if got := binary.LittleEndian.Uint64(c.Record().Value); got != want {
			t.Fatalf("record %d, want %d", got, want)
		}
		want++
	}
}

// TestCloseDuringPollRetries: Close returns while a Poll retries against a broker that
// is down, and that Poll returns ErrClosed. The Poll is in its periodic look at the
// topic's layout (every 2 s), an admin call that retries with Poll's own context (here
// without a deadline); Close used to wait for the admin's lock, held through those
// retries, for good.
func TestCloseDuringPollRetries(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b.Addr, "gone", 1)
	p := newProducer(t, b.Addr, "gone")
	ctx := ctxFor(t, 60*time.Second)
	if _, err := p.ProduceSync(ctx, &client.Record{Value: []byte("v")}, client.AckPersisted); err != nil {
		t.Fatal(err)
	}
	closeProducer(t, p)
	c, err := client.NewConsumer(ctx, "gone", client.Brokers(b.Addr), client.Start(client.Oldest()))
	if err != nil {
		t.Fatal(err)
	}
	for read := false; !read; {
		if err := c.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		for c.Next() { // to the answer's end: the next Poll asks for more
			read = true
		}
	}
	b.Kill()
	time.Sleep(2500 * time.Millisecond) // past the layout's look: the next Poll makes it
	polled := make(chan error, 1)
	go func() { polled <- c.Poll(context.Background()) }()
	time.Sleep(500 * time.Millisecond) // in its retries by now (any later point does too)
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close is still waiting for a Poll's retries against a broker that is down")
	}
	select {
	case err := <-polled:
		if !errors.Is(err, client.ErrClosed) {
			t.Fatalf("Poll during Close: %v, want %v", err, client.ErrClosed)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Poll did not return after Close")
	}
}
