package broker

import (
	"sync/atomic"
	"time"

	"sluice/engine"
	"sluice/internal/failpoint"
	"sluice/memarena"
	"sluice/netio"
	"sluice/sched"
	"sluice/wire"
)

// multiFetch is one fetch_multi request: several partitions of a topic read with one
// long poll and one byte budget (docs/protocol.md, fetch_multi). Its partitions may live
// on different shards, and a partition is touched only on its own shard, so the request
// travels: it runs on the shard of each group of its partitions in turn (a pass), as a
// sched.Task, and is never on two shards at once. The passes:
//
//	gather ──data, an error, or no wait──────────────────────────────► answer
//	   │ nothing anywhere
//	   ▼
//	park (a waiter per partition, on its shard) ─first waiter woken──► final gather ─► answer
//
// A waiter is an mfWaiter: the partition wakes it like any long poll (data, deadline,
// release, shutdown) and settle hands it back to woken.
// Only the first wake-up counts (state). When it comes from a partition's shard, the
// final gather reads only that shard's group, right there, and answers: the records that
// woke the request go out without a hop to another shard (the other partitions are
// answered with their offsets from the first gather). Then each other shard releases its
// waiters (a cleanup task), whose wake-ups do nothing; so no waiter outlives its request
// for long. A wake-up from the connection (Release) gathers every group.
//
// The groups are ordered by their first partition in the request, and partitions of one
// group keep request order: the budget goes to partitions in request order, except that
// those of one shard are read together (a hop between shards per partition would cost a
// goroutine wake-up each).
type multiFetch struct {
	b        *Broker
	c        *netio.Conn
	slot     netio.Slot
	hdr      wire.ResponseHeader
	maxBytes int
	version  uint16 // the request's: the layout of the answer's parts
	wait     bool
	deadline int64
	items    []mfItem  // in request order
	groups   []mfGroup // by shard
	// The pass state, owned by the pass running (hand-offs go through the shards' queues).
	phase mfPhase
	pass  int
	spent int
	// answeredAt is when an answer with records was queued (Unix ns; 0: none): the
	// start of its send stage, which release ends (stages.go).
	answeredAt int64
	// answered: the answer is queued (its Done releases the reads). Owned by the pass.
	answered bool
	// state says whether the request is parked and whether a waiter woke it; any
	// goroutine.
	state atomic.Int32

	// Room for a consumer's usual request (mfInline partitions on a few shards) and its
	// answer inside the request itself, so that it costs one allocation, not one per
	// slice (items, groups, their indexes, the answer's head, iovec and parts, each
	// partition's spans). The request is not pooled: it is referenced until its waiters on
	// other shards are released (a cleanup task, or their deadline when a shard's queue
	// is full) and until its connection has called a Release it took, and no single
	// owner knows when the last of those is done.
	itemBuf  [mfInline]mfItem
	groupBuf [mfInline]mfGroup
	orderBuf [mfInline]int
	headBuf  [wire.FetchMultiFrameHeaderSize + mfInline*(wire.FetchPartHeaderSize+8)]byte
	iovBuf   [mfInline][]byte
	moreBuf  [mfInline - 1]netio.Part
	cleanups [mfInline]mfCleanup
}

// mfInline is how many partitions a multiFetch holds without allocating beyond itself: a
// consumer's lane holds a handful.
const mfInline = 4

// mfItem is one partition of a multiFetch.
type mfItem struct {
	pt     *part
	id     uint32
	offset int64
	code   wire.Code
	win    engine.Window
	res    engine.FetchResult
	waiter mfWaiter
	spans  [1]memarena.Span // room for res.Spans: a read usually holds one span
}

// mfWaiter is a multiFetch's waiter on one partition: it only parks, and its wake-up goes
// to the request (settle calls woken on the partition's shard). It carries no request of
// its own, as a fetchTask does, so that the request's items stay small.
type mfWaiter struct {
	engine.Wait
	m  *multiFetch
	pt *part
}

// mfGroup is the partitions of a multiFetch that one shard owns.
type mfGroup struct {
	shard *sched.Shard
	items []int
}

type mfPhase uint8

const (
	mfGather mfPhase = iota // the first gather: may park when nothing is found
	mfPark                  // parking a waiter on every partition
	mfFinal                 // the gather after a wake-up: answers whatever it finds
)

// The values of multiFetch.state.
const (
	mfActive       int32 = iota // gathering, or answered
	mfParking                   // the park pass is running
	mfParkingWoken              // a waiter woke while the park pass was running
	mfParked                    // every waiter is parked
	mfWoken                     // a waiter woke a parked request: the final gather runs
)

func (b *Broker) handleFetchMulti(c *netio.Conn, slot netio.Slot, hdr wire.ResponseHeader, r *wire.FetchMultiRequest) {
	m := &multiFetch{b: b, c: c, slot: slot, hdr: hdr, maxBytes: int(r.MaxBytes), version: r.Version, wait: r.MaxWaitMs > 0,
		deadline: b.deadline(r.MaxWaitMs)}
	m.items = m.itemBuf[:0]
	if n := len(r.Partitions); n > mfInline {
		m.items = make([]mfItem, 0, n)
	}
	m.items = m.items[:len(r.Partitions)]
	m.groups = m.groupBuf[:0]
	for i, p := range r.Partitions {
		it := &m.items[i]
		it.id, it.offset, it.win.Checkpoint = p.Partition, p.Offset, -1
		pt, err := b.lookup(r.Topic, p.Partition)
		if err != nil {
			if code := codeOf(err); code != wire.CodeUnknownPartition {
				b.respond(c, slot, hdr, err, nil) // the topic: the whole request fails
				return
			}
			it.code = wire.CodeUnknownPartition
			continue
		}
		it.pt = pt
		it.waiter = mfWaiter{m: m, pt: pt}
		m.addGroup(pt.shard)
	}
	if len(m.groups) == 0 { // no partition exists: answer at once
		m.answer()
		return
	}
	m.orderGroups()
	m.submit(0)
}

// addGroup adds a group for sh unless it has one; orderGroups fills in its items.
func (m *multiFetch) addGroup(sh *sched.Shard) {
	if m.groupOf(sh) < 0 {
		m.groups = append(m.groups, mfGroup{shard: sh})
	}
}

// orderGroups sets each group's items: the indexes of its partitions, in request order,
// as consecutive runs of one array (one per request rather than one per group).
func (m *multiFetch) orderGroups() {
	order := m.orderBuf[:0]
	if len(m.items) > mfInline {
		order = make([]int, 0, len(m.items))
	}
	for g := range m.groups {
		start := len(order)
		for i := range m.items {
			if pt := m.items[i].pt; pt != nil && pt.shard == m.groups[g].shard {
				order = append(order, i)
			}
		}
		m.groups[g].items = order[start:len(order):len(order)]
	}
}

// submit moves the request to group g's shard. A full shard queue answers busy (waiters
// parked by then wake at their deadline and find the request answered).
func (m *multiFetch) submit(g int) {
	m.pass = g
	if err := m.groups[g].shard.Submit(m); err != nil {
		m.state.Store(mfActive)
		m.release()
		m.b.respond(m.c, m.slot, m.hdr, wire.NewError(wire.CodeBusy, "shard queue full"), nil)
	}
}

// Run runs the current pass on its group's shard.
func (m *multiFetch) Run(*sched.Shard) {
	defer m.recoverPass()
	if m.phase == mfPark {
		m.parkPass()
		return
	}
	m.gatherGroup(false)
	if m.pass+1 < len(m.groups) {
		m.submit(m.pass + 1)
		return
	}
	if m.phase == mfGather && m.wait && m.spent == 0 && !m.anyError() {
		// Nothing anywhere: park on every partition, walking the groups back from this
		// shard so that the first park needs no hop.
		m.phase = mfPark
		m.state.Store(mfParking)
		m.parkPass()
		return
	}
	m.answer()
}

// parkPass parks the current group's waiters and moves on to the previous group; after
// the first group, the request is parked, unless a waiter woke during the pass: then the
// final gather starts.
func (m *multiFetch) parkPass() {
	m.parkGroup()
	if m.pass > 0 {
		m.submit(m.pass - 1)
		return
	}
	if m.state.CompareAndSwap(mfParking, mfParked) {
		m.c.Park(m.slot, m) // may call Release at once: a later answer is ready
		return
	}
	m.state.Store(mfWoken) // a waiter woke during the pass
	m.startFinal()
}

// gatherGroup reads the current group's partitions. In the final gather it first
// releases the group's waiters still parked (their wake-ups are ignored). With
// memoryOnly (a wake-up run inline: answerFrom) it reads the arena only, and returns
// false as soon as a partition's records are not there, for the caller to have them read
// on the shard's goroutine (every read is made again then). Shard only.
func (m *multiFetch) gatherGroup(memoryOnly bool) bool {
	for _, i := range m.groups[m.pass].items {
		it := &m.items[i]
		pt := it.pt
		it.res.Release() // an empty read of the first gather may hold a segment
		if pt.p == nil {
			it.code, it.win = codeOf(pt.refusal()), engine.Window{Checkpoint: -1}
			continue
		}
		if m.phase == mfFinal {
			m.releaseWaiter(it)
		}
		it.code, it.win = wire.CodeNone, pt.p.Window()
		left := m.maxBytes - m.spent
		if left <= 0 && m.spent > 0 {
			continue // the budget is spent: offsets only
		}
		res, ok, err := pt.read(it.offset, max(left, 1), memoryOnly, it.spans[:0])
		if !ok {
			return false
		}
		if err != nil {
			it.code = codeOf(err)
			if it.code != wire.CodeOffsetOutOfRange {
				it.win = engine.Window{Checkpoint: -1}
			}
			continue
		}
		if m.spent > 0 && int(res.Len()) > left {
			// A read returns at least one whole batch, which only the first partition
			// with records may take beyond the budget (docs/protocol.md): later ones
			// would stack batches of up to batch.MaxSize each past it, over what the
			// connection reserved and over the client's frame limit.
			res.Release()
			continue // offsets only, as for a spent budget
		}
		it.res, it.win = res, res.Window
		n := int(res.Len())
		m.spent += n
		if n > 0 {
			failpoint.Panic("fetch_multi", pt.topic.meta.Name) // with records held
		}
	}
	return true
}

// parkGroup parks a waiter on each of the current group's partitions. A partition that
// has data at the offset already (it came after the gather) or cannot park counts as a
// wake-up. Shard only.
func (m *multiFetch) parkGroup() {
	for _, i := range m.groups[m.pass].items {
		it := &m.items[i]
		pt := it.pt
		it.res.Release() // the first gather's empty read may hold a segment: not while parked
		if pt.p != nil && pt.p.ParkFetch(&it.waiter, it.offset, m.deadline) {
			m.b.parkedFetch.Add(1)
			m.b.arm(pt)
			continue
		}
		m.woken(nil) // a full final gather: the data may be on any shard
	}
}

// releaseWaiter wakes it's waiter if it is still parked; its wake-up does nothing (the
// request is answered or being answered). Shard of it only.
func (m *multiFetch) releaseWaiter(it *mfItem) {
	if it.pt.p != nil && it.pt.p.Release(&it.waiter) {
		m.b.settle(it.pt)
	}
}

// woken is a wake-up from a waiter (its partition's shard) or from the connection
// (Release). The first one while parked starts the final gather; one during the park
// pass is left for that pass to act on; later ones do nothing. Any goroutine.
//
// sh is the shard woken runs on (a waiter's), nil when it runs elsewhere.
func (m *multiFetch) woken(sh *sched.Shard) {
	for {
		switch m.state.Load() {
		case mfParking:
			if m.state.CompareAndSwap(mfParking, mfParkingWoken) {
				return
			}
		case mfParked:
			if m.state.CompareAndSwap(mfParked, mfWoken) {
				m.wake(sh)
				return
			}
		default:
			return
		}
	}
}

// wake starts the final gather of a parked request that a waiter (on shard sh, nil for
// the connection) woke: this goroutine owns the request from here.
func (m *multiFetch) wake(sh *sched.Shard) {
	defer m.recoverPass()
	if g := m.groupOf(sh); g >= 0 {
		m.answerFrom(g, sh)
	} else {
		m.startFinal()
	}
}

// recoverPass recovers a panic in a pass of the request (deferred by whoever owns it:
// Run, wake). Answering with an internal error alone, as other requests do, would leave
// what the request holds held: the reads of its partitions (arena spans, segment
// regions) for good, and its waiters parked on other shards until their deadline.
func (m *multiFetch) recoverPass() {
	r := recover()
	if r == nil {
		return
	}
	m.state.Store(mfActive) // wake-ups from now on do nothing
	for g := range m.groups {
		// Best effort: with the queue full the waiters wake at their deadline.
		_ = m.groups[g].shard.Submit(m.cleanup(g))
	}
	if m.answered { // the answer is out: its Done releases the reads, once written
		m.b.logPanic("fetch_multi", nil, r)
		return
	}
	m.release()
	m.b.answerPanic("fetch_multi", nil, r, m.c, m.slot, m.hdr)
}

// groupOf returns the index of sh's group, -1 when sh is nil or has none.
func (m *multiFetch) groupOf(sh *sched.Shard) int {
	for g := range m.groups {
		if sh != nil && m.groups[g].shard == sh {
			return g
		}
	}
	return -1
}

// answerFrom gathers group g (on its shard sh, where the wake-up came from), answers,
// and has every other shard release its waiters. Woken inline (an append's event loop
// answering the polls: broker/produce.go) with records that are not in the arena, it
// starts the final gather of every group instead, which reads them on the shards'
// goroutines.
func (m *multiFetch) answerFrom(g int, sh *sched.Shard) {
	m.phase, m.pass, m.spent = mfFinal, g, 0
	if !m.gatherGroup(sh.Inline()) {
		for _, i := range m.groups[g].items { // not held across the final gather's hops
			m.items[i].res.Release()
		}
		m.startFinal()
		return
	}
	m.answer()
	for o := range m.groups {
		if o != g {
			// Best effort: with the queue full the waiters wake at their deadline.
			_ = m.groups[o].shard.Submit(m.cleanup(o))
		}
	}
}

// mfCleanup releases the waiters of one group of an answered multiFetch. Cleanups of
// different groups touch different items, so they may run at once.
type mfCleanup struct {
	m *multiFetch
	g int
}

// cleanup returns the task that releases group g's waiters: in the request itself for
// the first groups. A task has no state of its own, so the same one may be queued twice
// (an answer's cleanups, then a panic's) and run twice: the second finds nothing parked.
// Only the request's owner calls it.
func (m *multiFetch) cleanup(g int) *mfCleanup {
	if g < len(m.cleanups) {
		if m.cleanups[g].m == nil { // set once: a queued task may be running already
			m.cleanups[g] = mfCleanup{m: m, g: g}
		}
		return &m.cleanups[g]
	}
	return &mfCleanup{m: m, g: g}
}

// Run releases the group's waiters still parked.
func (c *mfCleanup) Run(*sched.Shard) {
	defer c.m.b.recoverShard("fetch_multi cleanup", nil)
	for _, i := range c.m.groups[c.g].items {
		c.m.releaseWaiter(&c.m.items[i])
	}
}

// Release asks for the answer now (netio.Releaser): a later answer on the connection is
// ready. Safe from any goroutine; it never blocks.
func (m *multiFetch) Release() { m.woken(nil) }

// startFinal starts the final gather. Only one goroutine gets here per request, after the
// park pass ended.
func (m *multiFetch) startFinal() {
	m.phase, m.spent = mfFinal, 0
	m.submit(0)
}

// anyError reports whether a partition's answer is an error (answered at once: the
// consumer must learn it, not wait).
func (m *multiFetch) anyError() bool {
	for i := range m.items {
		if m.items[i].code != wire.CodeNone {
			return true
		}
	}
	return false
}

// answer sends every partition's part in one response: the part headers in one buffer,
// each followed by its arena spans (writev) or its segment region (sendfile); in version
// 2 the buffer holds every part's header (the part table) and goes first, and the parts
// follow with their records only. The response holds the spans and regions until written
// (Done).
func (m *multiFetch) answer() {
	n, partHead := len(m.items), wire.FetchPartHeaderLen(m.version)
	head := m.headBuf[:0]
	if size := wire.FetchMultiFrameHeaderSize + n*partHead; size > len(m.headBuf) {
		head = make([]byte, 0, size)
	}
	rest := n * partHead
	spans := 0
	for i := range m.items {
		rest += int(m.items[i].res.Len())
		spans += len(m.items[i].res.Spans)
	}
	var body wire.FetchMultiResponse
	head = body.AppendFrameHeader(head, m.hdr, n, rest)
	iov := m.iovBuf[:0]
	if spans > len(m.iovBuf) {
		iov = make([][]byte, 0, spans)
	}
	resp := netio.Response{File: -1}
	if n > 1 {
		resp.More = m.moreBuf[:0]
		if n-1 > len(m.moreBuf) {
			resp.More = make([]netio.Part, 0, n-1)
		}
		resp.More = resp.More[:n-1]
	}
	for i := range m.items {
		it := &m.items[i]
		start := len(head)
		if i == 0 {
			start = 0 // the first part rides on the frame header
		}
		part := wire.FetchPart{Partition: it.id, Code: it.code, HighWatermark: it.win.Next,
			LogStartOffset: it.win.Start, Checkpoint: it.win.Checkpoint, NextOffset: -1}
		if it.code == wire.CodeNone {
			part.NextOffset = it.offset // no records: ask again from there
			if it.res.Len() > 0 {
				part.NextOffset = it.res.NextOffset
			}
		}
		head = part.AppendHeader(head, int(it.res.Len()), m.version)
		p := netio.Part{Head: head[start:len(head):len(head)], File: -1}
		if m.version >= 2 {
			// The table grows in head's room (sized for every header above, so the first
			// part's Head, set once the table is whole, aliases it); parts carry records.
			p.Head = nil
		}
		first := len(iov)
		for s := range it.res.Spans {
			iov = append(iov, it.res.Spans[s].Bytes())
		}
		p.Iov = iov[first:len(iov):len(iov)]
		if r := it.res.Region; r.Len > 0 {
			p.File, p.Pos, p.Len = int(r.File.Fd()), r.Pos, r.Len
		}
		if i == 0 {
			resp.Head, resp.Iov, resp.File, resp.Pos, resp.Len = p.Head, p.Iov, p.File, p.Pos, p.Len
		} else {
			resp.More[i-1] = p
		}
	}
	if m.version >= 2 {
		resp.Head = head
	}
	resp.Done = m
	if rest > n*partHead {
		m.answeredAt = time.Now().UnixNano()
	}
	m.answered = true
	m.c.Respond(m.slot, resp)
}

// Done is netio's word that the answer is written, or dropped with its connection
// (netio.Doner): release.
func (m *multiFetch) Done() { m.release() }

// release releases what the partitions' reads hold: netio calls it (Done) once the answer
// is written (or dropped with its connection), which ends the answer's send stage.
func (m *multiFetch) release() {
	if m.answeredAt > 0 {
		since(m.b.stages.send, m.answeredAt, time.Now().UnixNano())
		m.answeredAt = 0
	}
	for i := range m.items {
		res := &m.items[i].res
		res.Spans = memarena.ReleaseAll(res.Spans)
		res.Region.Release()
	}
}

// read reads the records at offset for a fetch answer. With memoryOnly (an event loop
// running the shard's work inline: a long poll woken by an append, broker/produce.go)
// it reads the arena only (Partition.FetchMemory): ok is false when the records are not
// there, and the caller has the shard's goroutine read them. Otherwise it reads through
// Partition.Fetch, which may read the disk, and ok is true. The failpoint arena_miss
// (tests: the arena cannot be made to reclaim records on cue between an append and its
// wake-up) makes every memory-only read miss, and a disk-capable read run inline
// panic, so that a test sees a loop that could wait for the disk. Shard only.
func (pt *part) read(offset int64, maxBytes int, memoryOnly bool, spans []memarena.Span) (engine.FetchResult, bool, error) {
	miss := failpoint.On("arena_miss", pt.topic.meta.Name)
	if memoryOnly {
		if miss {
			return engine.FetchResult{NextOffset: offset}, false, nil
		}
		return pt.p.FetchMemory(offset, maxBytes, spans)
	}
	if miss && pt.shard.Inline() {
		panic("BUG: broker: a read that may wait for the disk ran on an event loop")
	}
	res, err := pt.p.Fetch(offset, maxBytes, spans)
	return res, true, err
}
