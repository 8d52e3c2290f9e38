package client_test

import (
	"context"
	"encoding/binary"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"sluice/client"
)

// Integration tests with faults: a broker killed or stopped under a stream of records.

// TestExactlyOnceAcrossKill: a broker is killed with SIGKILL twice in the middle of a
// stream and restarted on the same address. Every record the producer reported persisted
// (its checkpoint, then Close) is in the topic exactly once; every other record is there
// at most once and is in Close's report.
func TestExactlyOnceAcrossKill(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b.Addr, "eos", 3)
	// A small buffer keeps the producer in step with the broker, so that the kills land
	// with records in every state: open, sent, accepted, persisted.
	p := newProducer(t, b.Addr, "eos", client.BatchBytes(8<<10), client.Linger(time.Millisecond),
		client.MaxBufferedBytes(512<<10), client.RetryBackoff(5*time.Millisecond, 100*time.Millisecond))
	const n = 200000
	var produced, checkpoint atomic.Int64
	done := make(chan error, 1)
	go func() {
		ctx := context.Background()
		for i := range n {
			r := &client.Record{Key: value(uint64(i%97), 8), Value: value(uint64(i), 64), Progress: int64(i + 1)}
			if err := p.Produce(ctx, r); err != nil {
				done <- err
				return
			}
			produced.Store(int64(i + 1))
			if i%500 == 0 {
				checkpoint.Store(p.Checkpoint())
			}
		}
		done <- nil
	}()
	for _, at := range []int64{n / 4, n / 2} {
		waitUntil(t, func() bool { return produced.Load() >= at })
		before := p.Checkpoint()
		b.Kill()
		b.Restart()
		t.Logf("killed at %d produced, checkpoint %d", produced.Load(), before)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	persisted := p.Checkpoint()
	var unpersisted []client.Record
	err := p.Close(ctxFor(t, 60*time.Second))
	var ue *client.UnpersistedError
	switch {
	case errors.As(err, &ue):
		unpersisted = ue.Records
	case err != nil:
		t.Fatal(err)
	default:
		persisted = n
	}
	checkExactlyOnce(t, consumeAll(t, b.Addr, "eos", int(persisted)), n, persisted, unpersisted)
}

// TestCloseReportsUnpersisted: the broker is killed and stays down; Close gives up and
// reports what no checkpoint covered. Once the broker is back, everything persisted before
// is there exactly once and the reported records at most once.
func TestCloseReportsUnpersisted(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b.Addr, "report", 2)
	p := newProducer(t, b.Addr, "report", client.BatchBytes(4<<10), client.Linger(time.Millisecond))
	ctx := ctxFor(t, 60*time.Second)
	const n = 20000
	for i := range n {
		if i == n/2 {
			b.Kill()
		}
		r := &client.Record{Key: value(uint64(i%13), 8), Value: value(uint64(i), 32), Progress: int64(i + 1)}
		if err := p.Produce(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	persisted := p.Checkpoint()
	closeCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err := p.Close(closeCtx)
	var ue *client.UnpersistedError
	if !errors.As(err, &ue) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close with the broker down: %v", err)
	}
	if int64(len(ue.Records)) > n-persisted || len(ue.Records) < n/2 {
		t.Fatalf("%d records reported, checkpoint %d of %d", len(ue.Records), persisted, n)
	}
	b.Restart()
	checkExactlyOnce(t, consumeAll(t, b.Addr, "report", int(persisted)), n, persisted, ue.Records)
}

// checkExactlyOnce checks the records read back against what the producer reported.
func checkExactlyOnce(t *testing.T, got []consumed, n int, persisted int64, unpersisted []client.Record) {
	t.Helper()
	seen := make([]int, n)
	for _, r := range got {
		if r.id >= uint64(n) {
			t.Fatalf("unknown record %d", r.id)
		}
		seen[r.id]++
		if seen[r.id] > 1 {
			t.Fatalf("record %d (progress %d) read twice, at offset %d of partition %d", r.id, r.id+1, r.offset, r.part)
		}
	}
	reported := map[uint64]bool{}
	for _, r := range unpersisted {
		reported[binary.LittleEndian.Uint64(r.Value)] = true
	}
	for id := range n {
		switch {
		case int64(id+1) <= persisted && seen[id] == 0:
			t.Fatalf("record %d reported persisted (checkpoint %d) but missing", id, persisted)
		case seen[id] == 0 && !reported[uint64(id)]:
			t.Fatalf("record %d missing and not reported", id)
		}
	}
	t.Logf("%d records read, checkpoint %d, %d reported unpersisted", len(got), persisted, len(unpersisted))
}

// TestBoundedMemoryWhenBrokerStalls: with the broker stopped (SIGSTOP) the producer holds
// at most MaxBufferedBytes, then refuses (ErrBufferFull) or blocks until its context ends;
// once the broker continues, everything accepted by Produce gets through exactly once.
func TestBoundedMemoryWhenBrokerStalls(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b.Addr, "stall", 2)
	const limit = 4 << 20
	p := newProducer(t, b.Addr, "stall", client.MaxBufferedBytes(limit), client.BlockOnFull(false),
		client.BatchBytes(64<<10), client.Linger(time.Millisecond))
	ctx := ctxFor(t, 60*time.Second)
	if err := p.Produce(ctx, &client.Record{Value: value(0, 1000)}); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := signal(t, b.Pid(), syscall.SIGSTOP)
	defer stopped()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	id := uint64(1)
	for ; ; id++ {
		err := p.Produce(ctx, &client.Record{Value: value(id, 1000)})
		if errors.Is(err, client.ErrBufferFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if id > 100*limit/1000 {
			t.Fatalf("no backpressure after %d records", id)
		}
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if buf := p.Buffered(); buf > limit || buf < limit*9/10 {
		t.Fatalf("buffered %d bytes at ErrBufferFull, limit %d", buf, limit)
	}
	if grown := int64(after.HeapInuse) - int64(before.HeapInuse); grown > 3*limit {
		t.Fatalf("heap grew by %d bytes for a limit of %d", grown, limit)
	}
	t.Logf("ErrBufferFull after %d records; heap grew %d KiB", id, (int64(after.HeapInuse)-int64(before.HeapInuse))>>10)
	stopped()
	waitUntil(t, func() bool { return p.Buffered() < limit/2 })
	if err := p.Produce(ctx, &client.Record{Value: value(id, 1000)}); err != nil {
		t.Fatalf("after SIGCONT: %v", err)
	}
	closeProducer(t, p)
	checkExactlyOnce(t, consumeAll(t, b.Addr, "stall", int(id+1)), int(id+1), int64(id+1), nil)
}

// TestProduceBlocksWhenBrokerStalls: a blocking producer waits for room until its
// context ends.
func TestProduceBlocksWhenBrokerStalls(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b.Addr, "block", 1)
	p := newProducer(t, b.Addr, "block", client.MaxBufferedBytes(1<<20), client.BatchBytes(32<<10))
	stopped := signal(t, b.Pid(), syscall.SIGSTOP)
	var err error
	for i := 0; err == nil; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err = p.Produce(ctx, &client.Record{Value: value(uint64(i), 1000)})
		cancel()
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocked produce: %v", err)
	}
	stopped()
	closeProducer(t, p)
}

// signal sends sig to pid and returns a function that sends SIGCONT once.
func signal(t *testing.T, pid int, sig syscall.Signal) func() {
	t.Helper()
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	return func() { once.Do(func() { syscall.Kill(pid, syscall.SIGCONT) }) }
}

// waitUntil polls cond for up to a minute.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within a minute")
		}
	}
}
