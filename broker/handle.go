package broker

import (
	"errors"
	"time"

	"sluice/engine"
	"sluice/memarena"
	"sluice/netio"
	"sluice/persist"
	"sluice/persist/local"
	"sluice/sched"
	"sluice/wire"
)

// Handle routes a request; it runs on an event loop and never blocks.
func (b *Broker) Handle(c *netio.Conn, slot netio.Slot, req *wire.Request) {
	hdr := wire.ResponseHeader{RequestID: req.Header.RequestID, APIKey: req.Header.APIKey}
	switch body := req.Body.(type) {
	case *wire.ProduceRequest:
		b.handleProduce(c, slot, hdr, body)
	case *wire.FetchRequest:
		b.handleFetch(c, slot, hdr, body)
	case *wire.MetadataRequest:
		b.respond(c, slot, hdr, nil, b.metadata(body))
	case *wire.DescribeTopicRequest:
		resp, err := b.describe(body.Name)
		if err != nil {
			b.respond(c, slot, hdr, err, nil) // not resp: a nil pointer in an interface is no nil body
			return
		}
		b.respond(c, slot, hdr, nil, resp)
	case *wire.ListOffsetsRequest:
		b.handleListOffsets(c, slot, hdr, body)
	case *wire.CreateTopicRequest:
		r := *body
		go func() { // opening partitions does I/O: off the loop
			if err := b.createTopic(&r); err != nil {
				b.respond(c, slot, hdr, err, nil)
				return
			}
			md := b.metadata(&wire.MetadataRequest{Topics: []string{r.Name}})
			b.respond(c, slot, hdr, nil, &wire.CreateTopicResponse{Topic: md.Topics[0]})
		}()
	default:
		b.respond(c, slot, hdr, wire.NewError(wire.CodeUnknownAPI, "no handler"), nil)
	}
}

// respond encodes and sends an answer (an error without body when err is set and body is
// nil), releasing parked fetches on the connection (see respondTo).
func (b *Broker) respond(c *netio.Conn, slot netio.Slot, hdr wire.ResponseHeader, err error, body wire.Body) {
	r := wire.Response{Header: hdr, Body: body}
	if err != nil {
		r.Header.Code = wire.CodeOf(err)
		r.Text = err.Error()
	}
	b.respondTo(c, slot, netio.Response{Head: r.AppendTo(nil), File: -1}, nil)
}

func (b *Broker) describe(name string) (*wire.DescribeTopicResponse, error) {
	b.mu.RLock()
	t := b.mu.topics[name]
	b.mu.RUnlock()
	if t == nil {
		return nil, wire.NewError(wire.CodeUnknownTopic, "unknown topic "+name)
	}
	resp := &wire.DescribeTopicResponse{Name: name, Version: t.meta.Version, Options: t.meta.Options}
	for i, p := range wire.NewPartitions(t.meta.Partitions, b.addr) {
		w := t.parts[i].p.Window() // log offsets are safe to read from any goroutine
		resp.Partitions = append(resp.Partitions, wire.PartitionState{Partition: p,
			LogStartOffset: w.Start, NextOffset: w.Next, Checkpoint: w.Checkpoint, Session: w.Session})
	}
	return resp, nil
}

// produceTask carries a produce request to its partition's shard.
type produceTask struct {
	b       *Broker
	pt      *part
	c       *netio.Conn
	slot    netio.Slot
	hdr     wire.ResponseHeader
	req     wire.ProduceRequest // Batches is the broker's own copy, in payload
	payload *[]byte
	res     engine.ProduceResult
	target  int64 // offset C must reach before answering (acks=persisted)
	timer   sched.Timer
	parked  bool
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
	if err := pt.shard.Submit(t); err != nil {
		b.busy(t)
		b.putPayload(t.payload)
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

// Run appends on the shard goroutine.
func (t *produceTask) Run(sh *sched.Shard) {
	res, err := t.pt.p.Produce(t.req.Version, t.req.Session, t.req.Batches)
	// The partition copied the batches into the arena and wrote them to the log: the
	// payload buffer is free again.
	t.b.putPayload(t.payload)
	t.payload, t.req.Batches = nil, nil
	t.res = res
	if res.Last >= 0 && res.Duplicates == 0 {
		t.b.wakeFetchers(t.pt)
	}
	if err != nil {
		t.fail(err)
		return
	}
	t.target = res.Last
	if res.Base < 0 { // empty produce or old duplicates: wait for everything accepted
		t.target = res.Next - 1
	}
	if t.req.WaitDurableMs > 0 && t.target > res.Checkpoint {
		t.parked = true
		t.pt.ackWaiters = append(t.pt.ackWaiters, t)
		t.timer = sh.After(time.Duration(t.req.WaitDurableMs)*time.Millisecond, func(time.Time) { t.b.expireAck(t) })
		return
	}
	t.answer(wire.CodeNone, "")
}

// fail answers an engine error with its code and, where the client needs them, the
// partition's current (V, S, C).
func (t *produceTask) fail(err error) {
	var we *engine.WindowError
	switch {
	case errors.As(err, &we):
		code := wire.CodeSessionMismatch
		if errors.Is(err, engine.ErrVersionMismatch) {
			code = wire.CodeVersionMismatch
		}
		t.answer(code, err.Error())
	case errors.Is(err, memarena.ErrFull):
		t.b.busy(t)
	case errors.Is(err, engine.ErrOutOfOrderSequence):
		t.answer(wire.CodeSequenceGap, err.Error())
	case errors.Is(err, engine.ErrInvalidBatch):
		t.answer(wire.CodeCorruptBatch, err.Error())
	case errors.Is(err, persist.ErrNoSpace):
		t.answer(wire.CodeNoSpace, err.Error())
	case errors.Is(err, persist.ErrDamaged), errors.Is(err, persist.ErrCorrupt):
		t.answer(wire.CodeCorruptData, err.Error())
	default:
		t.answer(wire.CodeNotServing, err.Error())
	}
}

// busy answers the throttle: memory is full of data that is not durable yet.
func (b *Broker) busy(t *produceTask) {
	t.res.Window = t.pt.p.Window()
	t.res.Base, t.res.Last = -1, -1
	t.answer(wire.CodeBusy, "")
}

func (t *produceTask) answer(code wire.Code, text string) {
	w := t.res.Window
	if w.Session == 0 {
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
	r := wire.Response{Header: t.hdr, Text: text, Body: body}
	r.Header.Code = code
	t.b.respondTo(t.c, t.slot, netio.Response{Head: r.AppendTo(nil), File: -1}, nil)
}

// answerDurable answers the producers whose target the checkpoint now covers.
func (b *Broker) answerDurable(pt *part) {
	if len(pt.ackWaiters) == 0 {
		return
	}
	c := pt.p.Window().Checkpoint
	kept := pt.ackWaiters[:0]
	for _, t := range pt.ackWaiters {
		if t.target <= c {
			t.timer.Stop()
			t.parked = false
			t.res.Window = pt.p.Window()
			t.answer(wire.CodeNone, "")
		} else {
			kept = append(kept, t)
		}
	}
	clear(pt.ackWaiters[len(kept):])
	pt.ackWaiters = kept
}

// expireAck answers a producer whose wait for durability ran out: with the current C,
// which the client compares with its offsets.
func (b *Broker) expireAck(t *produceTask) {
	if !t.parked {
		return
	}
	t.parked = false
	pt := t.pt
	for i, w := range pt.ackWaiters {
		if w == t {
			pt.ackWaiters = append(pt.ackWaiters[:i], pt.ackWaiters[i+1:]...)
			break
		}
	}
	t.res.Window = pt.p.Window()
	t.answer(wire.CodeNone, "")
}

// answerAllParked answers every parked request of a partition (shutdown).
func (b *Broker) answerAllParked(pt *part) {
	if err := pt.p.Sync(); err != nil {
		b.cfg.Logger.Error("final fsync failed", "topic", pt.topic.meta.Name, "partition", pt.id, "err", err)
	}
	b.answerDurable(pt)
	for _, t := range pt.ackWaiters {
		t.parked = false
		t.res.Window = pt.p.Window()
		t.answer(wire.CodeNone, "")
	}
	pt.ackWaiters = nil
	for _, f := range pt.fetchWaiters {
		f.parked = false
		f.timer.Stop()
		f.serve()
	}
	pt.fetchWaiters = nil
}

// isOutOfRange reports a fetch outside the log, answered with the partition's offsets.
func isOutOfRange(err error) bool { return errors.Is(err, local.ErrOffsetOutOfRange) }
