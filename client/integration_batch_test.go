package client_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"sluice/client"
	"sluice/wire"
)

// TestProduceBatchOrderAndStamps: records given to ProduceBatch, keyed and keyless, in
// calls of 1 to 50 through a buffer of four batches (so that calls wait for room part way
// through), all arrive once, each key's in call order, dense offsets, in the partition
// of their key; a record without a timestamp gets the time of its call, one with a
// timestamp keeps it.
func TestProduceBatchOrderAndStamps(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b.Addr, "batched", 4)
	p := newProducer(t, b.Addr, "batched", client.BatchBytes(8<<10), client.Linger(time.Millisecond),
		client.MaxBufferedBytes(32<<10))
	ctx := ctxFor(t, 60*time.Second)
	const n = 6000
	const stamped = int64(1_700_000_000_000) // an explicit timestamp, for every 5th record
	// The producer's record clock is the wall clock read once a second plus the monotonic
	// time since, both in whole milliseconds (client/clock.go): up to 2 ms behind a
	// reading of time.Now() taken at the same moment.
	const clockSlack = 2
	rs := make([]client.Record, 0, 50)
	before := time.Now().UnixMilli()
	for id, size := 0, 1; id < n; size = size%50 + 1 {
		rs = rs[:0]
		for range min(size, n-id) {
			r := client.Record{Value: value(uint64(id), 300)}
			if id%3 != 0 { // a third keyless
				r.Key = []byte(fmt.Sprintf("key-%d", id%11))
			}
			if id%5 == 0 {
				r.Timestamp = stamped + int64(id)
			}
			rs = append(rs, r)
			id++
		}
		if got, err := p.ProduceBatch(ctx, rs); err != nil || got != len(rs) {
			t.Fatalf("ProduceBatch of %d records before id %d: %d, %v", len(rs), id, got, err)
		}
	}
	closeProducer(t, p)
	after := time.Now().UnixMilli()
	got := consumeAll(t, b.Addr, "batched", n, client.Start(client.Oldest()))
	if len(got) != n {
		t.Fatalf("read %d records, produced %d", len(got), n)
	}
	seen := make([]bool, n)
	lastID := map[string]int64{}
	lastOff := map[int]int64{}
	for _, r := range got {
		if r.id >= n || seen[r.id] {
			t.Fatalf("record id %d read twice or never produced", r.id)
		}
		seen[r.id] = true
		if prev, ok := lastOff[r.part]; ok && r.offset != prev+1 {
			t.Fatalf("partition %d: offset %d after %d", r.part, r.offset, prev)
		}
		lastOff[r.part] = r.offset
		switch {
		case r.id%5 == 0 && r.ts != stamped+int64(r.id):
			t.Fatalf("record %d: timestamp %d, produced with %d", r.id, r.ts, stamped+int64(r.id))
		case r.id%5 != 0 && (r.ts < before-clockSlack || r.ts > after+clockSlack):
			t.Fatalf("record %d: timestamp %d outside its calls' [%d, %d] (± %d ms)", r.id, r.ts, before, after, clockSlack)
		}
		if r.key == "" {
			continue
		}
		if prev, ok := lastID[r.key]; ok && int64(r.id) <= prev {
			t.Fatalf("key %s: record %d after %d", r.key, r.id, prev)
		}
		lastID[r.key] = int64(r.id)
		if want := wire.PartitionOf(client.LogicalOf([]byte(r.key)), 4); r.part != want {
			t.Fatalf("key %s in partition %d, want %d", r.key, r.part, want)
		}
	}
}

// TestProduceBatchStopsAtFailure: ProduceBatch adds the records before one that fails
// and none after it, and says how many it added: a record too large, a full buffer that
// may not block, a closed producer.
func TestProduceBatchStopsAtFailure(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b.Addr, "stops", 1)
	p := newProducer(t, b.Addr, "stops", client.Linger(time.Hour), client.BatchBytes(64<<10),
		client.MaxBufferedBytes(64<<10), client.BlockOnFull(false))
	ctx := ctxFor(t, 30*time.Second)

	rs := []client.Record{{Value: value(0, 100)}, {Value: value(1, 100)},
		{Value: make([]byte, client.MaxRecordBytes+1)}, {Value: value(99, 100)}}
	got, err := p.ProduceBatch(ctx, rs)
	if got != 2 || !errors.Is(err, client.ErrRecordTooLarge) {
		t.Fatalf("a too large third record: added %d, %v; want 2, ErrRecordTooLarge", got, err)
	}

	// A linger of an hour and a broker that is not asked: the buffer of 64 KiB fills.
	full := make([]client.Record, 100)
	for i := range full {
		full[i].Value = value(uint64(2+i), 1024)
	}
	got, err = p.ProduceBatch(ctx, full)
	if !errors.Is(err, client.ErrBufferFull) || got == 0 || got >= len(full) {
		t.Fatalf("100 KiB into a buffer of 64 KiB that may not block: added %d, %v", got, err)
	}
	added := 2 + got
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	closeProducer(t, p)
	if got, err := p.ProduceBatch(ctx, rs[:1]); got != 0 || !errors.Is(err, client.ErrClosed) {
		t.Fatalf("after Close: added %d, %v; want 0, ErrClosed", got, err)
	}

	read := consumeAll(t, b.Addr, "stops", added, client.Start(client.Oldest()))
	if len(read) != added {
		t.Fatalf("read %d records, ProduceBatch said %d were added", len(read), added)
	}
	for i, r := range read {
		if r.id != uint64(i) {
			t.Fatalf("record %d has id %d: a record after a failure was added", i, r.id)
		}
	}
}

// TestProduceBatchEndsWithContext: a call that waits for room ends with its context, and
// says how many records it added before.
func TestProduceBatchEndsWithContext(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b.Addr, "waits", 1)
	// A buffer of 32 KiB and a broker stopped (SIGSTOP: the real process, paused, as a
	// hung host would be) that acknowledges nothing: the buffer stays full.
	p := newProducer(t, b.Addr, "waits", client.Linger(time.Millisecond), client.BatchBytes(16<<10),
		client.MaxBufferedBytes(32<<10))
	if err := syscall.Kill(b.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cont := func() { _ = syscall.Kill(b.Pid(), syscall.SIGCONT) }
	defer cont()
	rs := make([]client.Record, 64)
	for i := range rs {
		rs[i].Value = value(uint64(i), 1024)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	got, err := p.ProduceBatch(ctx, rs)
	if !errors.Is(err, context.DeadlineExceeded) || got == 0 || got >= len(rs) {
		t.Fatalf("64 KiB into 32 KiB with the broker stopped: added %d, %v", got, err)
	}
	cont()
	closeProducer(t, p)
}
