package broker

import (
	"errors"
	"time"

	"sluice/engine"
	"sluice/memarena"
	"sluice/netio"
	"sluice/persist"
	"sluice/sched"
	"sluice/wire"
)

// fetchTask carries a fetch request to its partition's shard, and waits there when it
// long-polls.
type fetchTask struct {
	b      *Broker
	pt     *part
	c      *netio.Conn
	slot   netio.Slot
	hdr    wire.ResponseHeader
	req    wire.FetchRequest
	timer  sched.Timer
	parked bool
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

// Run reads on the shard goroutine, or parks the request until data arrives or its max
// wait passes.
func (t *fetchTask) Run(sh *sched.Shard) {
	if t.req.MaxWaitMs > 0 && t.req.Offset == t.pt.p.Window().Next && !sh.Closing() {
		t.parked = true
		t.pt.fetchWaiters = append(t.pt.fetchWaiters, t)
		t.b.park(t)
		t.timer = sh.After(time.Duration(t.req.MaxWaitMs)*time.Millisecond, func(time.Time) { t.expire() })
		return
	}
	t.serve()
}

// serve answers with whatever the partition has at the offset: arena chunks by writev,
// or a segment region by sendfile; the chunks or the region stay held until written.
func (t *fetchTask) serve() {
	res, err := t.pt.p.Fetch(t.req.Offset, int(max(t.req.MaxBytes, 1)), nil)
	if err != nil {
		t.fail(err, res.Window)
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
		resp.Done = func() { memarena.ReleaseAll(spans) }
	case n > 0:
		region := res.Region
		resp.File, resp.Pos, resp.Len = int(region.File.Fd()), region.Pos, region.Len
		resp.Done = func() { region.Release() }
	}
	t.b.respondTo(t.c, t.slot, resp, t)
}

func (t *fetchTask) fail(err error, w engine.Window) {
	if isOutOfRange(err) {
		w = t.pt.p.Window()
		body := &wire.FetchResponse{HighWatermark: w.Next, LogStartOffset: w.Start, Checkpoint: w.Checkpoint}
		r := wire.Response{Header: t.hdr, Text: err.Error(), Body: body}
		r.Header.Code = wire.CodeOffsetOutOfRange
		t.b.respondTo(t.c, t.slot, netio.Response{Head: r.AppendTo(nil), File: -1}, t)
		return
	}
	code := wire.CodeNotServing
	if errors.Is(err, persist.ErrCorrupt) {
		code = wire.CodeCorruptData
	}
	t.b.respond(t.c, t.slot, t.hdr, wire.NewError(code, err.Error()), nil)
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
		w := pt.p.Window()
		resp := &wire.ListOffsetsResponse{HighWatermark: w.Next, LogStartOffset: w.Start}
		switch ts {
		case wire.TimestampLatest:
			resp.Offset = w.Next
		case wire.TimestampEarliest:
			resp.Offset = w.Start
		default:
			off, err := pt.p.Log().OffsetForTime(ts)
			if err != nil {
				code := wire.CodeNotServing
				if errors.Is(err, persist.ErrCorrupt) {
					code = wire.CodeCorruptData
				}
				b.respond(c, slot, hdr, wire.NewError(code, err.Error()), nil)
				return
			}
			resp.Offset = min(max(off, w.Start), w.Next)
		}
		b.respond(c, slot, hdr, nil, resp)
	}); err != nil {
		b.respond(c, slot, hdr, wire.NewError(wire.CodeBusy, "shard queue full"), nil)
	}
}

// expire answers a long poll whose wait ran out (with no records, or what arrived).
func (t *fetchTask) expire() {
	if !t.parked {
		return
	}
	t.parked = false
	ws := t.pt.fetchWaiters
	for i, w := range ws {
		if w == t {
			t.pt.fetchWaiters = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	t.serve()
}

// wakeFetchers answers the long polls of a partition that just got data.
func (b *Broker) wakeFetchers(pt *part) {
	ws := pt.fetchWaiters
	pt.fetchWaiters = nil
	for _, t := range ws {
		t.parked = false
		t.timer.Stop()
		t.serve()
	}
}

// Answers on a connection go out in request order, so a parked long poll would hold up
// every later answer on its connection (a consumer pipelining one fetch per partition
// would wait for its quietest partition). So when any other answer on a connection is
// ready, the connection's parked fetches are answered at once with what they have: max
// wait is an upper bound, and the consumer simply fetches again.

// park records a parked fetch under its connection.
func (b *Broker) park(t *fetchTask) {
	b.parkMu.Lock()
	b.parked[t.c] = append(b.parked[t.c], t)
	b.nParked.Add(1)
	b.parkMu.Unlock()
}

// respondTo answers a request (self is the fetch answering, nil for others) and releases
// the other fetches parked on the same connection.
func (b *Broker) respondTo(c *netio.Conn, slot netio.Slot, resp netio.Response, self *fetchTask) {
	var waiting []*fetchTask
	if b.nParked.Load() > 0 { // most answers: no lock at all while nobody long-polls
		b.parkMu.Lock()
		waiting = b.parked[c]
		delete(b.parked, c)
		b.nParked.Add(-int64(len(waiting)))
		b.parkMu.Unlock()
	}
	c.Respond(slot, resp)
	for _, t := range waiting {
		if t != self {
			t.pt.shard.SubmitFunc(func(*sched.Shard) { t.expire() })
		}
	}
}
