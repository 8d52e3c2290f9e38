package client_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"sluice/batch"
	"sluice/client"
	"sluice/internal/testbroker"
	"sluice/wire"
)

// Integration tests: each runs against a real broker process (testbroker). They state the
// invariants of DESIGN.md §6 that the client is responsible for.

func startBroker(t *testing.T, args ...string) *testbroker.Broker {
	t.Helper()
	return testbroker.Start(t, t.TempDir(), args...)
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func createTopic(t *testing.T, addr, name string, partitions int) wire.Topic {
	t.Helper()
	a, err := client.NewAdmin(client.Brokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	top, err := a.CreateTopic(ctxFor(t, 30*time.Second), name, partitions, wire.TopicOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return top
}

func newProducer(t *testing.T, addr, topic string, opts ...client.Opt) *client.Producer {
	t.Helper()
	p, err := client.NewProducer(ctxFor(t, 30*time.Second), topic, append([]client.Opt{client.Brokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func closeProducer(t *testing.T, p *client.Producer) {
	t.Helper()
	if err := p.Close(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// value makes a record value holding id, padded to size bytes.
func value(id uint64, size int) []byte {
	v := make([]byte, max(size, 8))
	binary.LittleEndian.PutUint64(v, id)
	return v
}

// consumed is a record read back.
type consumed struct {
	part    int
	offset  int64
	id      uint64
	logical uint16
	key     string
	ts      int64
}

// consumeAll reads every record of the topic (with opts) until want records came or a
// round of long polls brings nothing more once at least want were read.
func consumeAll(t *testing.T, addr, topic string, want int, opts ...client.Opt) []consumed {
	t.Helper()
	ctx := ctxFor(t, 60*time.Second)
	opts = append([]client.Opt{client.Brokers(addr), client.FetchMaxWait(100 * time.Millisecond)}, opts...)
	c, err := client.NewConsumer(ctx, topic, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []consumed
	for empty := 0; empty < 3 || len(out) < want; {
		if err := c.Poll(ctx); err != nil {
			t.Fatalf("poll after %d records: %v", len(out), err)
		}
		n := len(out)
		for c.Next() {
			r := c.Record()
			out = append(out, consumed{part: c.Partition(), offset: r.Offset, id: binary.LittleEndian.Uint64(r.Value),
				logical: r.Logical, key: string(r.Key), ts: r.Timestamp})
		}
		if err := c.Err(); err != nil {
			t.Fatal(err)
		}
		if len(out) == n && len(out) >= want {
			empty++
		}
	}
	return out
}

// TestOrderPerPartition: records of one key come back in produce order, offsets dense.
func TestOrderPerPartition(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b.Addr, "orders", 4)
	p := newProducer(t, b.Addr, "orders", client.BatchBytes(4<<10), client.Linger(time.Millisecond))
	ctx := ctxFor(t, 60*time.Second)
	const n = 20000
	for i := range n {
		key := []byte(fmt.Sprintf("key-%d", i%7))
		if err := p.Produce(ctx, &client.Record{Key: key, Value: value(uint64(i), 20)}); err != nil {
			t.Fatal(err)
		}
	}
	closeProducer(t, p)
	got := consumeAll(t, b.Addr, "orders", n)
	if len(got) != n {
		t.Fatalf("read %d records, produced %d", len(got), n)
	}
	lastID := map[string]int64{}
	lastOff := map[int]int64{}
	for _, r := range got {
		if prev, ok := lastID[r.key]; ok && int64(r.id) <= prev {
			t.Fatalf("key %s: record %d after %d", r.key, r.id, prev)
		}
		lastID[r.key] = int64(r.id)
		if prev, ok := lastOff[r.part]; ok && r.offset != prev+1 {
			t.Fatalf("partition %d: offset %d after %d", r.part, r.offset, prev)
		}
		lastOff[r.part] = r.offset
		if want := wire.PartitionOf(client.LogicalOf([]byte(r.key)), 4); r.part != want {
			t.Fatalf("key %s in partition %d, want %d", r.key, r.part, want)
		}
	}
}

// TestRoutingLogicalIDs: an explicit logical id lands in the partition serving it and is
// stored with the record.
func TestRoutingLogicalIDs(t *testing.T) {
	b := startBroker(t)
	top := createTopic(t, b.Addr, "routes", 3)
	p := newProducer(t, b.Addr, "routes")
	ctx := ctxFor(t, 30*time.Second)
	ids := []uint16{0, 1, 21845, 21846, 43690, 43691, 65535}
	for i, l := range ids {
		if _, err := p.ProduceSync(ctx, &client.Record{Value: value(uint64(i), 8), Logical: l, UseLogical: true}, client.AckAccepted); err != nil {
			t.Fatal(err)
		}
	}
	closeProducer(t, p)
	got := consumeAll(t, b.Addr, "routes", len(ids))
	if len(got) != len(ids) {
		t.Fatalf("read %d records", len(got))
	}
	for _, r := range got {
		l := ids[r.id]
		part := top.Partitions[r.part]
		if r.logical != l || uint32(l) < part.Lo || uint32(l) >= part.Hi {
			t.Fatalf("logical %d (stored %d) in partition %d [%d, %d)", l, r.logical, r.part, part.Lo, part.Hi)
		}
	}
}

// TestCodecsRoundTrip: every codec's batches come back byte for byte.
func TestCodecsRoundTrip(t *testing.T) {
	b := startBroker(t)
	for _, codec := range []batch.Codec{batch.CodecNone, batch.CodecZstd, batch.CodecS2, batch.CodecLZ4} {
		topic := "codec-" + codec.String()
		createTopic(t, b.Addr, topic, 1)
		p := newProducer(t, b.Addr, topic, client.Compression(codec), client.BatchBytes(64<<10))
		ctx := ctxFor(t, 30*time.Second)
		const n = 3000
		for i := range n {
			v := []byte(fmt.Sprintf("%08d {\"user\": %d, \"event\": \"click\", \"page\": \"/home\"}", i, i%100))
			binary.LittleEndian.PutUint64(v, uint64(i))
			if err := p.Produce(ctx, &client.Record{Key: []byte("k"), Value: v}); err != nil {
				t.Fatal(err)
			}
		}
		closeProducer(t, p)
		got := consumeAll(t, b.Addr, topic, n)
		if len(got) != n {
			t.Fatalf("%v: read %d records", codec, len(got))
		}
		for i, r := range got {
			if r.id != uint64(i) {
				t.Fatalf("%v: record %d has id %d", codec, i, r.id)
			}
		}
	}
}

// TestConsumeFromTime: a consumer started at a time reads from the first record stamped
// at or after it.
func TestConsumeFromTime(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b.Addr, "times", 2)
	p := newProducer(t, b.Addr, "times", client.BatchBytes(1<<10))
	ctx := ctxFor(t, 30*time.Second)
	const n = 3000 // 1000 records per second of timestamps, in small batches
	for i := range n {
		ts := int64(1_000_000 + (i/1000)*1000 + i%1000/10)
		if err := p.Produce(ctx, &client.Record{Key: []byte{byte(i % 5)}, Value: value(uint64(i), 16), Timestamp: ts}); err != nil {
			t.Fatal(err)
		}
	}
	closeProducer(t, p)
	for _, from := range []int64{999_000, 1_001_000, 1_001_050, 1_002_099, 1_003_000} {
		got := consumeAll(t, b.Addr, "times", 0, client.Start(client.AtTime(time.UnixMilli(from))))
		want := 0
		for i := range n {
			if int64(1_000_000+(i/1000)*1000+i%1000/10) >= from {
				want++
			}
		}
		if len(got) != want {
			t.Fatalf("from %d: read %d records, want %d", from, len(got), want)
		}
		for _, r := range got {
			if r.ts < from {
				t.Fatalf("from %d: read record %d stamped %d", from, r.id, r.ts)
			}
		}
	}
}

// TestConsumeFromTimeFirstRecords: a consumer started at a time returns exactly the
// records from the first one (in offset order) stamped at or after the time, whatever the
// timestamps after it: the broker's list_offsets gives the batch, the consumer passes
// the older records at its head. Timestamps dip inside batches, and the times asked for
// fall before, inside and between batches, on a record's time, and after every record.
func TestConsumeFromTimeFirstRecords(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b.Addr, "firsts", 1)
	p := newProducer(t, b.Addr, "firsts", client.BatchBytes(1<<10))
	ctx := ctxFor(t, 30*time.Second)
	const n = 2000
	stamp := func(i int) int64 {
		ts := int64(1_000_000 + 10*i)
		if i%7 == 3 {
			ts -= 25 // older than the two records before it
		}
		return ts
	}
	for i := range n {
		if err := p.Produce(ctx, &client.Record{Value: value(uint64(i), 16), Timestamp: stamp(i)}); err != nil {
			t.Fatal(err)
		}
	}
	closeProducer(t, p)
	for _, from := range []int64{0, 1_000_000, 1_000_001, stamp(3), stamp(3) + 1, stamp(4) - 1, stamp(777), stamp(1234) + 3, stamp(n - 1), stamp(n-1) + 1} {
		first := n
		for i := range n {
			if stamp(i) >= from {
				first = i
				break
			}
		}
		got := consumeAll(t, b.Addr, "firsts", n-first, client.Start(client.AtTime(time.UnixMilli(from))))
		if len(got) != n-first {
			t.Fatalf("from %d: read %d records, want %d (from record %d)", from, len(got), n-first, first)
		}
		for j, r := range got {
			if want := first + j; r.id != uint64(want) || r.offset != int64(want) || r.ts != stamp(want) {
				t.Fatalf("from %d: record %d is %d at offset %d stamped %d, want record %d", from, j, r.id, r.offset, r.ts, want)
			}
		}
	}
}

// TestLogicalRangeSubscription: a consumer of a logical range reads exactly the records
// whose logical id is in it, from the partitions serving it.
func TestLogicalRangeSubscription(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b.Addr, "ranges", 4)
	p := newProducer(t, b.Addr, "ranges")
	ctx := ctxFor(t, 30*time.Second)
	const n = 6000
	logical := func(i int) uint16 { return uint16(i * 65536 / n) }
	for i := range n {
		if err := p.Produce(ctx, &client.Record{Value: value(uint64(i), 8), Logical: logical(i), UseLogical: true}); err != nil {
			t.Fatal(err)
		}
	}
	closeProducer(t, p)
	f := func(lo, hi uint16) {
		t.Helper()
		want := 0
		for i := range n {
			if l := logical(i); l >= lo && l <= hi {
				want++
			}
		}
		got := consumeAll(t, b.Addr, "ranges", want, client.LogicalRange(lo, hi))
		if len(got) != want {
			t.Fatalf("[%d, %d]: read %d records, want %d", lo, hi, len(got), want)
		}
		for _, r := range got {
			if r.logical < lo || r.logical > hi || logical(int(r.id)) != r.logical {
				t.Fatalf("[%d, %d]: record %d with logical %d", lo, hi, r.id, r.logical)
			}
		}
	}
	f(10000, 30000)
	f(0, 0)
	f(16384, 16384+16383)
	f(65535, 65535)
	f(0, 65535)
}

// TestProduceSyncPersisted: a synchronous produce waiting for persistence returns the
// record's offset, and the partition's checkpoint covers it.
func TestProduceSyncPersisted(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b.Addr, "sync", 2)
	p := newProducer(t, b.Addr, "sync")
	ctx := ctxFor(t, 30*time.Second)
	a, err := client.NewAdmin(client.Brokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for i := range 20 {
		res, err := p.ProduceSync(ctx, &client.Record{Key: []byte("k"), Value: value(uint64(i), 8), Progress: int64(i + 1)}, client.AckPersisted)
		if err != nil || res.Offset != int64(i) {
			t.Fatalf("record %d: %+v, %v", i, res, err)
		}
		d, err := a.DescribeTopic(ctx, "sync")
		if err != nil || d.Partitions[res.Partition].Checkpoint < res.Offset {
			t.Fatalf("record %d at %d, checkpoint %d: %v", i, res.Offset, d.Partitions[res.Partition].Checkpoint, err)
		}
		if cp := p.Checkpoint(); cp != int64(i+1) {
			t.Fatalf("checkpoint %d after record %d persisted", cp, i)
		}
	}
	closeProducer(t, p)
}
