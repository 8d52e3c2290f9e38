package broker

import (
	"errors"
	"time"

	"sluice/engine"
	"sluice/internal/failpoint"
	"sluice/netio"
	"sluice/persist"
	"sluice/sched"
	"sluice/wire"
)

// produceTask carries a produce request to its partition's shard, and waits there (as an
// engine.Waiter) when it asks to be answered once durable.
type produceTask struct {
	engine.Wait
	b       *Broker
	pt      *part
	c       *netio.Conn
	slot    netio.Slot
	hdr     wire.ResponseHeader
	req     wire.ProduceRequest // Batches is the broker's own copy, in payload
	payload *[]byte
	res     engine.ProduceResult
}

func (b *Broker) handleProduce(c *netio.Conn, slot netio.Slot, hdr wire.ResponseHeader, r *wire.ProduceRequest) {
	pt, err := b.lookup(r.Topic, r.Partition)
	if err != nil {
		b.respond(c, slot, hdr, err, nil)
		return
	}
	t := &produceTask{b: b, pt: pt, c: c, slot: slot, hdr: hdr, req: *r}
	t.req.Topic = nil
	// The one copy of the payload: out of gnet's buffer, which is reused after Handle
	// returns. The partition copies it into the arena (its write buffer) and hands this
	// copy to the kernel with pwrite.
	t.payload = b.getPayload(len(r.Batches))
	t.req.Batches = append((*t.payload)[:0], r.Batches...)
	b.copied.Add(uint64(len(r.Batches)))
	if err := pt.shard.Submit(t); err != nil {
		b.putPayload(t.payload)
		t.answerBusy()
	}
}

// getPayload takes a buffer for a produce payload from b.payloads, which recycles them so
// that a steady stream of 64 KiB requests does not allocate (and collect) 64 KiB each.
func (b *Broker) getPayload(n int) *[]byte {
	p, _ := b.payloads.Get().(*[]byte)
	if p == nil {
		p = new([]byte)
	}
	if cap(*p) < n {
		*p = make([]byte, 0, max(n, 64<<10))
	}
	return p
}

// putPayload returns a buffer; oversized ones (a rare 64 MiB batch) are left to the GC.
func (b *Broker) putPayload(p *[]byte) {
	if cap(*p) <= 4<<20 {
		b.payloads.Put(p)
	}
}

// Run appends on the shard goroutine, then answers now or parks until C covers the
// request.
func (t *produceTask) Run(sh *sched.Shard) {
	defer t.b.recoverRequest("produce", t.pt, t.c, t.slot, t.hdr)
	pt := t.pt
	if pt.p == nil {
		t.b.putPayload(t.payload)
		t.b.respond(t.c, t.slot, t.hdr, wire.NewError(wire.CodeNotServing, pt.errOffline().Error()), nil)
		return
	}
	failpoint.Panic("produce", pt.topic.meta.Name)
	res, err := pt.p.Produce(t.req.Version, t.req.Session, t.req.Batches)
	if n := uint64(res.AppendedBytes); n > 0 {
		t.b.produced.Add(n)
		t.b.copied.Add(n) // into the arena's write buffer
	}
	// The partition copied the batches into the arena and wrote them to the store: the
	// payload buffer is free again.
	t.b.putPayload(t.payload)
	t.payload, t.req.Batches = nil, nil
	t.res = res
	t.b.noteAppend(pt, err)
	switch {
	case err != nil:
		t.fail(err)
	case t.req.WaitDurableMs > 0 && pt.p.ParkDurable(t, res.Target(), t.b.deadline(t.req.WaitDurableMs)):
		t.b.parkedAck.Add(1) // answered by settle once C covers it, or at its deadline
	default:
		t.answer(wire.CodeNone, "")
	}
	t.b.settle(pt) // the fetches this produce woke, the produces its checkpoint covers
}

// deadline returns the driver-clock deadline of a wait of ms milliseconds, capped by
// Config.MaxWait.
func (b *Broker) deadline(ms uint32) int64 {
	return b.now() + int64(min(time.Duration(ms)*time.Millisecond, b.cfg.MaxWait))
}

// noteAppend keeps the partition's disk-full state for /metrics and logs: the first
// refusal is logged (then at most once a minute), and the next successful append ends
// it.
func (b *Broker) noteAppend(pt *part, err error) {
	switch {
	case errors.Is(err, persist.ErrNoSpace):
		if !pt.noSpace.Swap(true) {
			pt.appendLog.allow(time.Now()) // the next line of this kind waits a full interval
			b.cfg.Logger.Error("disk full: the partition refuses writes until space is freed",
				"topic", pt.topic.meta.Name, "partition", pt.id, "err", err)
		} else {
			pt.appendLog.error(b.cfg.Logger, "disk full: still refusing writes", pt, err)
		}
	case err == nil:
		if pt.noSpace.Swap(false) {
			b.cfg.Logger.Info("disk space is back: the partition takes writes again", "topic", pt.topic.meta.Name, "partition", pt.id)
		}
	case errors.Is(err, persist.ErrFailed):
		pt.failed.Store(true)
		pt.appendLog.error(b.cfg.Logger, "the partition's log failed: it takes no more writes until the broker restarts", pt, err)
	}
}

// fail answers an engine error with its code and, where the client needs them, the
// partition's current (V, S, C).
func (t *produceTask) fail(err error) {
	switch code := codeOf(err); code {
	case wire.CodeBusy:
		t.answerBusy()
	default:
		t.answer(code, wire.TextOf(err))
	}
}

// answerBusy answers the throttle: memory is full of data that is not durable yet, or
// the shard's queue is full. It runs on the loop or the shard and reads the window
// without a lock.
func (t *produceTask) answerBusy() {
	if t.pt.p != nil {
		t.res.Window = t.pt.p.Window()
	}
	t.res.Base, t.res.Last = -1, -1
	t.answer(wire.CodeBusy, "")
}

// answerWindow answers a produce that waited for C, now covered or out of time: with the
// current window, which the client compares with its offsets.
func (t *produceTask) answerWindow() {
	t.res.Window = t.pt.p.Window()
	t.answer(wire.CodeNone, "")
}

func (t *produceTask) answer(code wire.Code, text string) {
	w := t.res.Window
	if w.Session == 0 && t.pt.p != nil {
		w = t.pt.p.Window()
	}
	body := &wire.ProduceResponse{Version: w.Version, Session: w.Session, Checkpoint: w.Checkpoint,
		BaseOffset: t.res.Base, LastOffset: t.res.Last}
	if code == wire.CodeBusy {
		body.RetryAfterMs = uint32(max(t.b.cfg.BusyRetryAfter.Milliseconds(), 1))
	}
	if code != wire.CodeNone {
		body.BaseOffset, body.LastOffset = -1, -1
	}
	var bodyOrNil wire.Body = body
	if w.Session == 0 {
		bodyOrNil = nil // an offline partition has no window to report
	}
	r := wire.Response{Header: t.hdr, Text: text, Body: bodyOrNil}
	r.Header.Code = code
	t.c.Respond(t.slot, netio.Response{Head: r.AppendTo(nil), File: -1})
}
