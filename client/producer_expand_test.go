package client

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"sluice/wire"
)

// A producer across expansions without brokers: the test plays every partition,
// handing each window's requests their answers as the sender and the reader would
// (link.deliver), and the metadata refresh's answer (applyTopicLocked).

// testProducer returns a producer of a topic at version 7 with parts partitions, whose
// links run no goroutines: partition i's broker is "b<i>".
func testProducer(t *testing.T, parts int) *Producer {
	t.Helper()
	p := &Producer{topic: "t", topicB: []byte("t"), pid: 42, t0: time.Now(), cfg: defaultCfg()}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	t.Cleanup(p.cancel)
	p.mu.sh = winShared{batchBytes: 1024, requestBytes: 1024, maxInflight: 4, linger: 5 * ms,
		newPID: func() int64 { return 43 }}
	p.mu.changed = make(chan struct{})
	p.mu.clock = newRecordClock(p.t0)
	p.mu.rt = router{p: parts}
	p.mu.version = 7
	p.startLink = func(*link) {}
	for i := range parts {
		p.mu.wins = append(p.mu.wins, newWindow(&p.mu.sh, i, 7, p.pid))
		p.mu.links = append(p.mu.links, p.linkLocked(fmt.Sprint("b", i)))
	}
	return p
}

// testTopic is the metadata of the topic at version v with n partitions.
func testTopic(v uint32, n int) wire.Topic {
	t := wire.Topic{Name: "t", Version: v}
	for i := range n {
		lo, hi := wire.LogicalRange(i, n)
		t.Partitions = append(t.Partitions, wire.Partition{ID: uint32(i), Lo: uint32(lo), Hi: uint32(hi),
			Addr: fmt.Sprint("b", i)})
	}
	return t
}

// answerNext sends partition part's next data request and answers it with code and
// resp, as the reader would; then the expansion is finished if this resolved it. It
// returns the request's batches (false when the window had nothing to send).
func (p *Producer) answerNext(t *testing.T, part int, code wire.Code, resp *wire.ProduceResponse) bool {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.mu.wins[part]
	r := &sendReq{}
	if !w.nextRequest(never-1, r) {
		return false
	}
	w.writeDone(r)
	w.onAnswer(r, code, resp, p.now(), ms)
	p.finishExpansionLocked()
	p.notifyLocked()
	return true
}

// refreshTo applies the metadata of the topic at version v with n partitions.
func (p *Producer) refreshTo(v uint32, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.applyTopicLocked(testTopic(v, n))
	p.notifyLocked()
}

// sealedOnTwo returns a test producer of 2 partitions holding one sealed batch of one
// record of logical id 20000 (partition 0 of 2, partition 1 of 4), and a context of 5 s.
func sealedOnTwo(t *testing.T) (*Producer, context.Context) {
	t.Helper()
	p := testProducer(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	if err := p.Produce(ctx, &Record{UseLogical: true, Logical: 20000, Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.mu.wins[0].seal()
	p.mu.Unlock()
	return p, ctx
}

// TestProducerExpandFlushAfterMove: a window whose unheld batches all went to other
// partitions' windows holds nothing; WaitPersisted must not wait for those batches in
// it (they are waited for where they went).
func TestProducerExpandFlushAfterMove(t *testing.T) {
	p, ctx := sealedOnTwo(t)
	// Partition 0 switched to version 8 before the batch came: refused, never appended.
	if !p.answerNext(t, 0, wire.CodeVersionMismatch, &wire.ProduceResponse{Version: 8, Session: 5, Checkpoint: 9,
		BaseOffset: -1, LastOffset: -1}) {
		t.Fatal("nothing sent")
	}
	p.refreshTo(8, 4)
	p.mu.Lock()
	if p.mu.next != nil || len(p.mu.wins) != 4 || len(p.mu.wins[0].q) != 0 || !p.mu.wins[1].open {
		t.Fatalf("after the expansion: next %v, %d windows", p.mu.next, len(p.mu.wins))
	}
	p.mu.Unlock()
	// Partition 1 appends it at 0, durable at once.
	if !p.answerNext(t, 1, wire.CodeNone, &wire.ProduceResponse{Version: 8, Session: 6, Checkpoint: 0,
		BaseOffset: 0, LastOffset: 0}) {
		t.Fatal("the moved batch was not sent")
	}
	wctx, wcancel := context.WithTimeout(ctx, time.Second)
	defer wcancel()
	if err := p.WaitPersisted(wctx); err != nil {
		t.Fatalf("WaitPersisted with every record persisted: %v", err)
	}
	if err := p.Flush(wctx); err != nil {
		t.Fatalf("Flush with every record persisted: %v", err)
	}
}

// TestProducerExpandSyncTwice: a record whose batch is routed again by two expansions in
// a row (its new partition refused it too: it had switched again meanwhile) is followed
// by ProduceSync to where it went the second time.
func TestProducerExpandSyncTwice(t *testing.T) {
	p := testProducer(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	type result struct {
		res Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Logical 20000: partition 0 of 2, 1 of 4, 2 of 8.
		res, err := p.ProduceSync(ctx, &Record{UseLogical: true, Logical: 20000, Value: []byte("x")}, AckPersisted)
		done <- result{res, err}
	}()
	for {
		p.mu.Lock()
		n := len(p.mu.wins[0].q)
		p.mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	refused := func(v uint32) *wire.ProduceResponse {
		return &wire.ProduceResponse{Version: v, Session: 5, Checkpoint: -1, BaseOffset: -1, LastOffset: -1}
	}
	if !p.answerNext(t, 0, wire.CodeVersionMismatch, refused(8)) {
		t.Fatal("nothing sent")
	}
	p.refreshTo(8, 4)
	if !p.answerNext(t, 1, wire.CodeVersionMismatch, refused(9)) {
		t.Fatal("the moved batch was not sent")
	}
	p.refreshTo(9, 8)
	if !p.answerNext(t, 2, wire.CodeNone, &wire.ProduceResponse{Version: 9, Session: 6, Checkpoint: 0,
		BaseOffset: 0, LastOffset: 0}) {
		t.Fatal("the batch moved twice was not sent")
	}
	select {
	case r := <-done:
		if r.err != nil || r.res.Partition != 2 || r.res.Offset != 0 {
			t.Fatalf("ProduceSync: %+v, %v; want partition 2 offset 0", r.res, r.err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("ProduceSync still waits for a record persisted after its second move")
	}
}

// TestProducerRefusedDuringExpansion: a broker refuses the producer's credentials for
// good while an expansion waits for its window to drain (a request in flight). The
// window fails, which counts as drained: the expansion ends, and Flush returns the
// refusal instead of waiting for its context (it waited while the expansion was
// pending, before looking at the windows' errors).
func TestProducerRefusedDuringExpansion(t *testing.T) {
	p, ctx := sealedOnTwo(t)
	p.mu.Lock()
	w := p.mu.wins[0]
	r := &sendReq{}
	if !w.nextRequest(never-1, r) { // in flight, never answered
		t.Fatal("nothing to send")
	}
	w.writeDone(r)
	p.mu.Unlock()
	p.refreshTo(8, 4)
	p.mu.Lock()
	if p.mu.next == nil {
		t.Fatal("the expansion did not wait for the request in flight")
	}
	p.failLinkLocked(p.mu.links[0], fmt.Errorf("reconnect: %w", wire.ErrAuthFailed))
	next := p.mu.next
	p.mu.Unlock()
	if next != nil {
		t.Fatal("the expansion still waits for a window that failed")
	}
	if err := p.Flush(ctx); !errors.Is(err, wire.ErrAuthFailed) {
		t.Fatalf("flush: %v, want %v", err, wire.ErrAuthFailed)
	}
}
