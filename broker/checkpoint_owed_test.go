package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"sluice/batch"
	"sluice/memarena"
	"sluice/sched"
	"sluice/wire"
)

// TestCheckpointRefusedByFullShardIsRetried: a checkpoint the shard's full queue refuses
// is submitted again, and the persister does not park while one is owed. It used to be
// dropped: what the persister wrote was no longer pending in the store, so no later pass
// submitted a checkpoint again, the write buffers kept on-disk data as not durable, and
// with the arena full of it every produce was answered busy for good (until a client
// happened to wait for C).
//
// The shard's queue is filled here by blocking the shard goroutine in a task and
// queueing no-ops behind it until Submit refuses (Shards: 1, QueueLen: 4). A real broker
// gets there with readers of old data on a slow disk (the review's reproduction slowed
// segment reads with errorfs), which takes a fault-injected filesystem and seconds of
// timing; a blocked task is the same full queue, deterministically. Produces with
// acks=accepted are answered on the event loop without the shard, so the arena fills
// while the shard is held, and the persister writes everything and has its checkpoint
// refused. Then the shard is released: the checkpoint must reach the write buffers.
func TestCheckpointRefusedByFullShardIsRetried(t *testing.T) {
	cfg := Config{DataDir: t.TempDir(),
		Arena: memarena.Config{Size: 2 << 20, ChunkSize: 64 << 10},
		Sched: sched.Config{Shards: 1, QueueLen: 4}}
	cfg.Net.Listen = "127.0.0.1:0"
	b, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	defer func() {
		unblock() // before Shutdown, which waits for the shard
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b.Shutdown(ctx)
	}()
	if err := b.createTopic(&wire.CreateTopicRequest{Name: "hot", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	sh := b.sched.Shard(0)
	w := b.wakes[0]
	pt := b.partsOf(sh)[0]

	// Hold the shard and fill its queue.
	started := make(chan struct{})
	if err := sh.SubmitFunc(func(*sched.Shard) { close(started); <-release }); err != nil {
		t.Fatal(err)
	}
	<-started
	noop := func(*sched.Shard) {}
	for {
		err := sh.SubmitFunc(noop)
		if errors.Is(err, sched.ErrBusy) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	refused := sh.Stats().Busy // only the persister submits from here on

	// Fill the arena with acks=accepted produces until it answers busy.
	c := dialWire(t, b.Addr())
	defer c.nc.Close()
	bt := wireBatch(60 << 10)
	accepted := 0
	for code := wire.CodeNone; code == wire.CodeNone; {
		if code = c.produce(t, "hot", bt); code == wire.CodeNone {
			accepted++
		} else if code != wire.CodeBusy {
			t.Fatalf("produce: %v", code)
		}
		if accepted > 1000 {
			t.Fatal("the arena never filled")
		}
	}

	// The persister writes it all; its checkpoint is refused (the shard's queue is full).
	waitFor(t, 10*time.Second, "the persister to write everything and submit a checkpoint", func() bool {
		return pt.p.Pending() == 0 && sh.Stats().Busy > refused
	})
	// The old persister parked right after the refused submission (nothing pending); wait
	// for that, so that the shard is not released before the last pass's submission. The
	// new one owes the checkpoint and does not park.
	for deadline := time.Now().Add(500 * time.Millisecond); !w.parked.Load() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	parkedOwing := w.parked.Load()
	_, as := b.Stats()
	t.Logf("%d batches accepted, then busy; shard refused %d submissions; arena pending %d; persister parked: %v",
		accepted, sh.Stats().Busy-refused, as.PendingBytes, parkedOwing)
	if as.PendingBytes == 0 {
		t.Fatal("arena pending 0 while the shard was held: the checkpoint got through, the test proves nothing")
	}

	// Release the shard: the checkpoint must follow within a few passes.
	unblock()
	deadline := time.Now().Add(30 * time.Second) // a bound for a hang, not a speed goal
	for {
		if _, as = b.Stats(); as.PendingBytes == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint lost: 30 s after the shard drained, the arena still holds %d bytes as not durable "+
				"(the store has %d pending; persister parked while owing: %v)", as.PendingBytes, pt.p.Pending(), parkedOwing)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code := c.produce(t, "hot", bt); code != wire.CodeNone {
		t.Fatalf("produce after the checkpoint: %v, want accepted", code)
	}
	if parkedOwing {
		t.Error("the persister parked while it owed a checkpoint")
	}
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
	}
}

// wireConn speaks the wire protocol, one request and one answer at a time.
type wireConn struct {
	nc  net.Conn
	id  uint32
	buf []byte
}

func dialWire(t *testing.T, addr string) *wireConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return &wireConn{nc: nc}
}

// produce sends batches to partition 0 of topic (acks=accepted) and returns the
// answer's code.
func (c *wireConn) produce(t *testing.T, topic string, batches []byte) wire.Code {
	t.Helper()
	c.id++
	req := wire.Request{Header: wire.RequestHeader{APIKey: wire.APIProduce, RequestID: c.id},
		Body: &wire.ProduceRequest{Topic: []byte(topic), Version: 1, Batches: batches}}
	c.buf = req.AppendTo(c.buf[:0])
	if _, err := c.nc.Write(c.buf); err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, 4)
	if _, err := io.ReadFull(c.nc, hdr); err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, 4+binary.LittleEndian.Uint32(hdr))
	copy(frame, hdr)
	if _, err := io.ReadFull(c.nc, frame[4:]); err != nil {
		t.Fatal(err)
	}
	_, h, err := wire.PeekResponse(frame, wire.DefaultMaxFrame)
	if err != nil {
		t.Fatal(err)
	}
	return h.Code
}

// wireBatch is one batch of one record with a size-byte value.
func wireBatch(size int) []byte {
	var bb batch.Builder
	bb.Reset(nil, 0, -1)
	bb.Add(0, time.Now().UnixMilli(), nil, make([]byte, size))
	return bb.Finish()
}
