package broker

import (
	"sluice/engine"
	"sluice/internal/failpoint"
	"sluice/memarena"
	"sluice/netio"
	"sluice/sched"
	"sluice/wire"
)

// fetchTask carries a fetch request to its partition's shard, and waits there (as an
// engine.Waiter) when it long-polls. While it waits, its connection may release it
// (netio calls Release when a later answer on the connection is ready), which submits
// the same task to the shard again.
type fetchTask struct {
	engine.Wait
	b       *Broker
	pt      *part
	c       *netio.Conn
	slot    netio.Slot
	hdr     wire.ResponseHeader
	req     wire.FetchRequest
	started bool // shard-owned: Run ran once (a later Run is a release, or onShard)
	// onShard is set when serve ran inline (an append's event loop answering the polls:
	// broker/produce.go) and the read needs more than the arena (records on disk, an
	// offset out of range, a closing or damaged partition): the task is queued to its
	// shard, whose goroutine serves it. Shard-owned.
	onShard bool
}

func (b *Broker) handleFetch(c *netio.Conn, slot netio.Slot, hdr wire.ResponseHeader, r *wire.FetchRequest) {
	pt, err := b.lookup(r.Topic, r.Partition)
	if err != nil {
		b.respond(c, slot, hdr, err, nil)
		return
	}
	t := &fetchTask{b: b, pt: pt, c: c, slot: slot, hdr: hdr, req: *r}
	t.req.Topic = nil
	if err := pt.shard.Submit(t); err != nil {
		b.respond(c, slot, hdr, wire.NewError(wire.CodeBusy, "shard queue full"), nil)
	}
}

// Run reads on the shard goroutine, or parks the request until data arrives, its max
// wait passes or its connection releases it. A second Run is that release.
func (t *fetchTask) Run(*sched.Shard) {
	defer t.b.recoverRequest("fetch", t.pt, t.c, t.slot, t.hdr)
	pt := t.pt
	if t.onShard {
		t.onShard = false
		t.serve()
		return
	}
	if t.started {
		if pt.p.Release(t) { // still parked: answer now with what there is
			t.b.settle(pt)
		}
		return
	}
	t.started = true
	failpoint.Panic("fetch", pt.topic.meta.Name)
	if pt.p == nil {
		t.b.respond(t.c, t.slot, t.hdr, pt.refusal(), nil)
		return
	}
	if t.req.MaxWaitMs > 0 && pt.p.ParkFetch(t, t.req.Offset, t.b.deadline(t.req.MaxWaitMs)) {
		t.b.parkedFetch.Add(1)
		t.c.Park(t.slot, t)
		t.b.arm(pt)
		return
	}
	t.serve()
}

// Release asks the shard to answer the parked fetch now (netio.Releaser). Safe from any
// goroutine; it never blocks. When the shard's queue is full the fetch answers at its
// deadline instead.
func (t *fetchTask) Release() { _ = t.pt.shard.Submit(t) }

// serve answers with whatever the partition has at the offset: arena chunks by writev,
// or a store region by sendfile; the chunks or the region stay held until written.
func (t *fetchTask) serve() {
	res, ok, err := t.pt.read(t.req.Offset, int(max(t.req.MaxBytes, 1)), t.pt.shard.Inline(), nil)
	if !ok { // not in the arena: the event loop does not wait for the disk
		t.onShard = true
		if t.pt.shard.Submit(t) != nil {
			t.onShard = false
			t.b.respond(t.c, t.slot, t.hdr, wire.NewError(wire.CodeBusy, "shard queue full"), nil)
		}
		return
	}
	if err != nil {
		if rr := t.b.remote; rr != nil && codeOf(err) == wire.CodeOffsetOutOfRange && t.req.Offset < t.pt.p.LocalStart() {
			// Below what this broker holds: HDFS may have it (remote.go).
			if !rr.submit(t) {
				t.b.respond(t.c, t.slot, t.hdr, wire.NewError(wire.CodeBusy, "too many fetches from HDFS waiting"), nil)
			}
			return
		}
		t.fail(err)
		return
	}
	body := wire.FetchResponse{HighWatermark: res.Next, LogStartOffset: res.Start, Checkpoint: res.Checkpoint}
	n := res.Len()
	resp := netio.Response{Head: body.AppendFrameHeader(nil, t.hdr, int(n)), File: -1}
	switch {
	case len(res.Spans) > 0:
		for i := range res.Spans {
			resp.Iov = append(resp.Iov, res.Spans[i].Bytes())
		}
		spans := res.Spans
		resp.Done = netio.DoneFunc(func() { memarena.ReleaseAll(spans) })
	case n > 0:
		region := res.Region
		resp.File, resp.Pos, resp.Len = int(region.File.Fd()), region.Pos, region.Len
		resp.Done = netio.DoneFunc(func() { region.Release() })
	}
	t.c.Respond(t.slot, resp)
}

// fail answers a fetch error; out of range carries the partition's offsets.
func (t *fetchTask) fail(err error) {
	code := codeOf(err)
	if code != wire.CodeOffsetOutOfRange {
		t.b.respond(t.c, t.slot, t.hdr, wire.NewError(code, wire.TextOf(err)), nil)
		return
	}
	w := t.pt.p.Window()
	body := &wire.FetchResponse{HighWatermark: w.Next, LogStartOffset: w.Start, Checkpoint: w.Checkpoint}
	t.b.respond(t.c, t.slot, t.hdr, wire.NewError(code, wire.TextOf(err)), body)
}

// handleListOffsets answers the offset a timestamp falls at. The lookup may read index
// files, so it runs on the partition's shard, never on the loop.
func (b *Broker) handleListOffsets(c *netio.Conn, slot netio.Slot, hdr wire.ResponseHeader, r *wire.ListOffsetsRequest) {
	pt, err := b.lookup(r.Topic, r.Partition)
	if err != nil {
		b.respond(c, slot, hdr, err, nil)
		return
	}
	ts := r.Timestamp
	if err := pt.shard.SubmitFunc(func(*sched.Shard) {
		defer b.recoverRequest("list_offsets", pt, c, slot, hdr)
		if pt.p == nil {
			b.respond(c, slot, hdr, pt.refusal(), nil)
			return
		}
		w := pt.p.Window()
		resp := &wire.ListOffsetsResponse{HighWatermark: w.Next, LogStartOffset: w.Start, Offset: w.Next}
		switch ts {
		case wire.TimestampLatest:
		case wire.TimestampEarliest:
			resp.Offset = w.Start
		default:
			off, err := pt.p.OffsetForTime(ts)
			if err != nil {
				b.respond(c, slot, hdr, wire.NewError(codeOf(err), wire.TextOf(err)), nil)
				return
			}
			resp.Offset = min(max(off, w.Start), w.Next)
		}
		b.respond(c, slot, hdr, nil, resp)
	}); err != nil {
		b.respond(c, slot, hdr, wire.NewError(wire.CodeBusy, "shard queue full"), nil)
	}
}
