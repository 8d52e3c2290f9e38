package client_test

import (
	"testing"
	"time"

	"sluice/client"
)

// TestFullBufferSendsOpenBatches: with a linger far longer than the test and a buffer of
// one batch, records still flow: when Produce must wait for room, the open batches go at
// once (as Kafka's accumulator sends batches when its memory is exhausted). Before, the
// batch being filled held the buffer until its linger ended, and Produce waited that
// long, here an hour.
func TestFullBufferSendsOpenBatches(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b.Addr, "full", 1)
	p := newProducer(t, b.Addr, "full", client.Linger(time.Hour), client.BatchBytes(64<<10),
		client.MaxBufferedBytes(64<<10))
	ctx := ctxFor(t, 30*time.Second)
	const n = 200 // 200 KiB through a buffer of 64 KiB
	for i := range n {
		if err := p.Produce(ctx, &client.Record{Value: value(uint64(i), 1024)}); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	closeProducer(t, p)
	got := consumeAll(t, b.Addr, "full", n, client.Start(client.Oldest()))
	if len(got) != n {
		t.Fatalf("read %d records, want %d", len(got), n)
	}
	for i, r := range got {
		if r.id != uint64(i) {
			t.Fatalf("record %d has id %d", i, r.id)
		}
	}
}
