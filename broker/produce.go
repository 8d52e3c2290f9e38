package broker

import (
	"errors"
	"sync"
	"time"

	"sluice/engine"
	"sluice/internal/failpoint"
	"sluice/netio"
	"sluice/persist"
	"sluice/sched"
	"sluice/wire"
)

// produceTask is a produce request's answer: made on the event loop that appended it, and
// carried to the partition's shard to wait there (as an engine.Waiter) when the request
// asks to be answered once durable.
type produceTask struct {
	engine.Wait
	b    *Broker
	pt   *part
	c    *netio.Conn
	slot netio.Slot
	hdr  wire.ResponseHeader
	wait uint32 // the request's wait for durability, ms
	res  engine.ProduceResult
}

// handleProduce appends on the event loop that read the request, straight out of its
// socket buffer: the partition validates the batches in place and copies each once, to
// its place in the arena (the one user-space copy of a produced byte; the persister
// writes it to disk from there). The partition's append lock is held for that memory
// work only, so the loop never waits for the disk. Acks=accepted is answered here; a
// request that waits for durability goes to the partition's shard to park.
func (b *Broker) handleProduce(c *netio.Conn, slot netio.Slot, hdr wire.ResponseHeader, r *wire.ProduceRequest) {
	start := time.Now()
	pt, err := b.lookup(r.Topic, r.Partition)
	if err != nil {
		b.respond(c, slot, hdr, err, nil)
		return
	}
	if pt.p == nil {
		b.respond(c, slot, hdr, pt.refusal(), nil)
		return
	}
	if err := b.clusterRefusal(pt); err != nil {
		b.respond(c, slot, hdr, err, nil)
		return
	}
	failpoint.Panic("produce", pt.topic.meta.Name)
	// On this goroutine's stack: only a request that waits for durability outlives the
	// handler, and it goes to its shard in a copy (park). A task per request was 1 MB/s
	// of the broker's allocation at 10 000 records/s.
	t := produceTask{b: b, pt: pt, c: c, slot: slot, hdr: hdr, wait: r.WaitDurableMs}
	res, err := pt.p.Produce(r.Version, r.Session, r.Batches, start)
	wake := false // long polls are parked on the partition: wake them
	t.res = res
	if n := uint64(res.AppendedBytes); n > 0 {
		b.produced.Add(n)
		b.copied.Add(n) // the one copy, into the arena's write buffer
		if b.shipper != nil {
			pt.appended.Add(n) // for the HDFS lag in bytes
		}
		if pt.p.FetchesParked() {
			// The first append since the polls were last woken starts their wake stage.
			pt.arrivedAt.CompareAndSwap(0, time.Now().UnixNano())
			wake = true
		}
		b.kickPersister(pt)
	}
	b.noteAppend(pt, err)
	switch {
	case err != nil:
		t.fail(err)
	case t.wait > 0:
		t.park()
	}
	now := time.Now().UnixNano()
	since(b.stages.queue, c.ReadAt(), start.UnixNano())
	since(b.stages.append, start.UnixNano(), now)
	if wake {
		// An idle shard's polls are answered here, on this loop, without waking the
		// shard's goroutine (sched.Shard.TryRun says why); a busy one gets the work
		// queued, behind what it has. So only a few polls are answered here (each a
		// read of memory and an answer written, µs), and a partition with many
		// consumers parked leaves them to its shard. The loop never reads the disk: a
		// poll whose records are no longer in the arena is handed to the shard's
		// goroutine (part.read).
		switch {
		case pt.p.ParkedFetches() <= inlineWakeMax && pt.shard.TryRun(pt.dataArrived):
			b.wakesLoop.Add(1)
		case pt.shard.SubmitFunc(pt.dataArrived) == nil: // a full queue: the polls answer at their deadline
			b.wakesShard.Add(1)
		}
	}
	if err == nil && t.wait == 0 {
		// Acks=accepted, answered after the wake: an answer is written by the goroutine
		// that gives it (netio/send.go), so what is answered first goes out first, and
		// the polls' records, which end-to-end latency waits for, go before the
		// producer's acknowledgment, which only frees a slot of its pipeline.
		t.answer(wire.CodeNone, "")
	}
}

// park hands a produce that waits for durability to its partition's shard, in a copy of
// t that lives until it is answered.
func (t *produceTask) park() {
	parked := new(produceTask)
	*parked = *t
	if t.pt.shard.Submit(parked) != nil {
		parked.answer(wire.CodeNone, "") // the shard is swamped: the client polls for C
	}
}

// inlineWakeMax is the most long polls an event loop answers itself after an append
// (handleProduce); more are woken on the partition's shard.
const inlineWakeMax = 4

// Run parks a produce that waits for durability on its partition's shard, or answers at
// once when C covers it already.
func (t *produceTask) Run(*sched.Shard) {
	defer t.b.recoverRequest("produce", t.pt, t.c, t.slot, t.hdr)
	if t.pt.p.ParkDurable(t, t.res.Target(), t.b.deadline(t.wait)) {
		t.b.parkedAck.Add(1) // answered by settle once C covers it, or at its deadline
		t.b.arm(t.pt)
		return
	}
	t.answerWindow()
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
		b.noteNoSpace(pt, fromAppend, err)
	case err == nil:
		if pt.noSpace.Load() { // one atomic load per request while the disk has room
			b.noteSpace(pt, fromAppend)
		}
	case errors.Is(err, persist.ErrFailed):
		pt.failed.Store(true)
		pt.appendLog.error(b.cfg.Logger, "the partition's log failed: it takes no more writes until the broker restarts", pt, err)
	}
}

// The two places that find a partition's disk full: an append that found no room, and
// the persister that could not get the next segment file. Each clears only what it set:
// an append that still fits in the active segment's reserved space says nothing about
// the next file, so it must not declare the space back while the persister lacks it.
const (
	fromAppend = iota
	fromPersist
)

// spaceState is a partition's full-disk state by source. Changed on the slow path only.
type spaceState struct {
	mu   sync.Mutex
	full [2]bool
}

// set records source src full or not and reports whether the partition as a whole went
// from having room to full (began) or back (ended).
func (s *spaceState) set(src int, full bool) (began, ended bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	was := s.full[fromAppend] || s.full[fromPersist]
	s.full[src] = full
	now := s.full[fromAppend] || s.full[fromPersist]
	return !was && now, was && !now
}

// noteNoSpace records that pt's disk is full as src found it: logged once when it
// starts, then at most once a minute. Any goroutine.
func (b *Broker) noteNoSpace(pt *part, src int, err error) {
	if began, _ := pt.space.set(src, true); began {
		pt.noSpace.Store(true)
		pt.appendLog.allow(time.Now()) // the next line of this kind waits a full interval
		b.cfg.Logger.Error("disk full: the partition refuses writes until space is freed (what it accepted waits in memory)",
			"topic", pt.topic.meta.Name, "partition", pt.id, "err", err)
		return
	}
	pt.appendLog.error(b.cfg.Logger, "still no space: the partition refuses writes", pt, err)
}

// noteSpace records that src found room again; once no source lacks it, the partition
// takes writes again (logged). Any goroutine.
func (b *Broker) noteSpace(pt *part, src int) {
	if _, ended := pt.space.set(src, false); ended {
		pt.noSpace.Store(false)
		b.cfg.Logger.Info("disk space is back: the partition takes writes again", "topic", pt.topic.meta.Name, "partition", pt.id)
	}
}

// fail answers an engine error with its code and, where the client needs them, the
// partition's current (V, S, C).
func (t *produceTask) fail(err error) {
	code := codeOf(err)
	if int(code) < len(t.b.refused) {
		t.b.refused[code].Add(1)
	}
	switch code {
	case wire.CodeBusy:
		t.answerBusy()
	case wire.CodeSequenceGap:
		// A producer's batch that does not continue what the partition holds: the
		// requests a correct producer pipelined behind one answered busy (it resends
		// them from the refused one), or a producer whose window and the partition's
		// history disagree (it gives up on the partition). The broker cannot tell the
		// two apart, and a throttled broker with many partitions met the first on every
		// one (a review counted 2 520 lines in 20 s at one a minute per partition):
		// logged at most once a minute for the whole broker, at Info.
		if ok, n := t.b.gapLog.allow(time.Now()); ok {
			t.b.cfg.Logger.Info("a producer's sequence does not continue the partition's (normal for requests pipelined behind a busy answer)",
				"topic", t.pt.topic.meta.Name, "partition", t.pt.id, "session", t.res.Window.Session, "err", err, "suppressed", n)
		}
		t.answer(code, wire.TextOf(err))
	default:
		t.answer(code, wire.TextOf(err))
	}
}

// answerBusy answers the throttle: memory is full of data that is not durable yet, or
// the shard's queue is full. It runs on the loop or the shard and reads the window
// without a lock. The offsets are -1 (nothing was appended), but for a request larger
// than the partition's write buffer refused midway: then they are those of the prefix
// it appended (engine.Partition.hold), so that a producer without an id can resend the
// rest alone.
func (t *produceTask) answerBusy() {
	if t.pt.p != nil {
		t.res.Window = t.pt.p.Window()
	}
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
	body := wire.ProduceResponse{Version: w.Version, Session: w.Session, Checkpoint: w.Checkpoint,
		BaseOffset: t.res.Base, LastOffset: t.res.Last}
	if code == wire.CodeBusy {
		body.RetryAfterMs = uint32(max(t.b.cfg.BusyRetryAfter.Milliseconds(), 1))
	}
	if code != wire.CodeNone && code != wire.CodeBusy && code != wire.CodeNoSpace {
		// A refusal appended nothing; busy and no_space may follow a prefix a request
		// appended, and say which (docs/protocol.md; -1 when none). (answerBusy said so
		// while this line still wiped the offsets of every refusal: a review.)
		body.BaseOffset, body.LastOffset = -1, -1
	}
	bodyOrNil := &body
	if w.Session == 0 {
		bodyOrNil = nil // an offline partition has no window to report
	}
	hdr := t.hdr
	hdr.Code = code
	// Built on this stack and copied into the request's slot: an acknowledgment per
	// produce request allocates nothing (it was four allocations: the body, and the
	// head's buffer growing three times).
	var buf [128]byte
	t.c.RespondCopy(t.slot, wire.AppendProduceResponse(buf[:0], hdr, text, bodyOrNil))
}
