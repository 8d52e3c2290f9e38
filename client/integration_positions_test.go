package client_test

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"sluice/client"
)

// TestStartPositionsResume: a consumer stopped part way through a topic, and a new one
// started at the positions the first reached (StartPositions, Consumer.Positions), read
// every record exactly once between them. A partition left out of the positions starts
// where Start says; positions past the end or below 0 are clamped to what the partition
// holds; positions naming a partition the consumer does not read are refused.
func TestStartPositionsResume(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b.Addr, "resume", 3)
	p := newProducer(t, b.Addr, "resume", client.BatchBytes(2<<10), client.Linger(time.Millisecond))
	ctx := ctxFor(t, 60*time.Second)
	const n = 3000
	for i := range n {
		if err := p.Produce(ctx, &client.Record{Key: []byte(fmt.Sprintf("k%d", i%11)), Value: value(uint64(i), 40)}); err != nil {
			t.Fatal(err)
		}
	}
	closeProducer(t, p)

	// The first consumer stops in the middle of an answer, records still unread in it.
	first, err := client.NewConsumer(ctx, "resume", client.Brokers(b.Addr), client.FetchMaxWait(50*time.Millisecond),
		client.FetchMaxBytes(8<<10))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]int{}
	for len(seen) < n/2 {
		if err := first.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		for len(seen) < n/2 && first.Next() {
			seen[binary.LittleEndian.Uint64(first.Record().Value)]++
		}
		if err := first.Err(); err != nil {
			t.Fatal(err)
		}
	}
	pos := first.Positions()
	for id := range 3 {
		if off, ok := first.Position(id); !ok || pos[id] != off || len(pos) != 3 {
			t.Fatalf("partition %d: Position %d, %v; Positions %v", id, off, ok, pos)
		}
	}
	first.Close()

	read := func(want int, opts ...client.Opt) map[uint64]int {
		t.Helper()
		got := map[uint64]int{}
		for _, r := range consumeAll(t, b.Addr, "resume", want, opts...) {
			got[r.id]++
		}
		return got
	}
	for id, c := range read(n-len(seen), client.StartPositions(pos)) {
		seen[id] += c
	}
	if len(seen) != n {
		t.Fatalf("the two consumers read %d distinct records of %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("record %d read %d times", id, c)
		}
	}

	// Partition 2 left out starts where Start says (Newest: only what comes after);
	// partition 0 asked for past its end starts at its end, partition 1 below 0 at its
	// start.
	ends := map[int]int64{}
	for _, r := range consumeAll(t, b.Addr, "resume", n) {
		ends[r.part] = max(ends[r.part], r.offset+1)
	}
	c, err := client.NewConsumer(ctx, "resume", client.Brokers(b.Addr), client.FetchMaxWait(50*time.Millisecond),
		client.Start(client.Newest()), client.StartPositions(map[int]int64{0: ends[0] + 1000, 1: -5}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := map[int]int64{0: ends[0], 1: 0, 2: ends[2]}
	for id, off := range want {
		if got, _ := c.Position(id); got != off {
			t.Fatalf("partition %d starts at %d, want %d (its end %d)", id, got, off, ends[id])
		}
	}

	_, err = client.NewConsumer(ctx, "resume", client.Brokers(b.Addr), client.StartPositions(map[int]int64{3: 0}))
	if err == nil || !strings.Contains(err.Error(), "partition 3") {
		t.Fatalf("positions naming partition 3 of 3: %v, want an error naming it", err)
	}
}
