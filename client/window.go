package client

import (
	"math"

	"sluice/batch"
	"sluice/codec"
	"sluice/wire"
)

// never is a wake-up time that does not come.
const never = math.MaxInt64

// lingerInflight bounds the requests in flight under which a batch that has lingered is
// sealed and sent. With that many unanswered, the open batch keeps growing until an
// answer comes (or it fills): under load the answers pace the batches, which grow with
// the load instead of going out every linger (a linger of 200 µs at 130 000 records/s
// would make 5 000 requests a second of 26 records each), while a partition with a quiet
// pipe still sends its batch as soon as it has lingered. Nagle's algorithm, with two
// requests of slack.
const lingerInflight = 2

// winShared is what the windows of one producer share. The producer's lock guards it
// together with the windows.
type winShared struct {
	comp         codec.Compressor
	codec        batch.Codec
	batchBytes   int
	requestBytes int
	maxInflight  int
	linger       int64     // nanoseconds
	lastSend     int64     // when the last data request went out (sealAt)
	buffered     int64     // bytes held by every window: open batches and sealed ones
	bufs         batchBufs // recycled batch buffers (bufpool.go)
	// freeBytes bounds the capacity of the recycled batch buffers (0: two of the
	// largest).
	freeBytes int64
	// pinned is the capacity of the buffers of the sealed batches that count in
	// buffered. A batch keeps the buffer it was built in, however much of it is empty,
	// until pinned passes compactAt: then every held batch whose buffer is over twice its
	// size is copied into one of its size (compact). pinLimit is the most pinned may
	// reach without a compaction: twice MaxBufferedBytes, the memory the producer
	// promises to stay within (0, in tests: every seal compacts, as if always short).
	pinned, pinLimit, compactAt int64
	// compactAll compacts every window of the producer (nil: only the one sealing).
	compactAll func()
	// newPID returns a fresh producer id, for a window whose sequences would pass
	// math.MaxInt32.
	newPID func() int64
	// clock is the producer's record clock, read by add when it opens a batch and its
	// caller did not read it (nil in tests that always pass the time).
	clock *recordClock
}

// getBuf returns an empty batch buffer of at least hint bytes (bufpool.go).
func (sh *winShared) getBuf(hint int) []byte {
	if sh.bufs.sizes == nil {
		sh.bufs.init(sh.batchBytes+sh.batchBytes/8, sh.freeBytes)
	}
	return sh.bufs.get(hint)
}

// putBuf recycles a batch buffer no request points at any more.
func (sh *winShared) putBuf(b []byte) {
	if sh.bufs.sizes != nil {
		sh.bufs.put(b)
	}
}

// pbatch is a sealed batch held by its window until a checkpoint covers it or the window
// fails. The producer's lock guards it.
type pbatch struct {
	buf     []byte // the whole batch, base offset 0, as sent
	count   int
	pid     int64   // its producer id
	ord     uint64  // position in the window's sequence of batches, from 1
	minProg int64   // smallest positive progress number of its records, 0 if none
	prog    []int64 // progress number per record; nil when no record had one
	// base and last are its offsets once accepted in the current session, -1 when not
	// known. last is exact when exact is set, else an upper bound of the true last offset.
	base, last int64
	exact      bool
	// resent is set once a request carrying it was lost or refused after it was sent:
	// its answer then may count it with batches the broker no longer remembers, and its
	// offsets are never taken as exact.
	resent   bool
	writing  int  // requests being written that point at buf
	accepted bool // accepted at least once (for ProduceSync and Flush)
	durable  bool // a checkpoint covered it; it has left the window
	released bool // left the window: buf goes back to the pool once writing is 0
	// sync is set when a ProduceSync waits for it. moved is set when an expansion routed
	// its records again (no partition held it): its last record is in moved, of movedWin.
	sync     bool
	moved    *pbatch
	movedWin *window
	// opened is when its first record came (Producer.now); written is set once a request
	// carrying it was written, under the producer's stages lock, not the producer's
	// (stages.go).
	opened  int64
	written bool
}

// inflight is a data request the window handed out and has no answer for.
type inflight struct {
	ord uint64 // ord of its first batch
	n   int    // number of batches
}

// sendReq is a produce request a window hands to the driver: the driver encodes it,
// writes it, calls writeDone, and passes the answer to onAnswer (onPoll for a poll).
type sendReq struct {
	epoch   uint64
	ord     uint64 // first batch's ord; 0 for a poll
	poll    bool
	version uint32
	session uint64
	pid     int64
	size    int       // bytes of batches
	batches []*pbatch // q[sent:sent+n] at the time; the slice is the caller's to reuse
}

// window is the producer's side of one physical partition: the write window of
// DESIGN.md §2. It is a synchronous state machine: no goroutines, no sockets, and time
// comes in as arguments (nanoseconds). The batches in q are in sequence order:
//
//	q[:acked]       accepted in the current session, waiting for a checkpoint
//	q[acked:sent]   in flight (requests in reqs, oldest first)
//	q[sent:]        sealed, not sent yet
//
// and the open batch, being built, comes after them.
type window struct {
	sh      *winShared
	part    int
	version uint32 // V
	session uint64 // S; 0 until the first answer
	ckpt    int64  // C, as last reported in the current session
	pid     int64  // producer id of the next batch
	seq     int32  // base sequence of the next batch

	bld       batch.Builder
	open      bool
	openFirst int64   // when the open batch got its first record
	openAfter int64   // the producer's last request when the open batch began (sealAt)
	openProg  []int64 // progress numbers of the open batch; nil while none
	lastLen   int     // a recent maximum of batch bytes before compression: the next one's buffer size

	q         []*pbatch
	acked     int
	sent      int
	reqs      []inflight
	epoch     uint64 // bumped on every rewind: answers to older requests are stale
	synced    bool   // the last answer of this epoch was a success: pipelining allowed
	polling   bool   // an empty produce is in flight
	notBefore int64  // no request before this time (busy, errors)
	nextOrd   uint64

	acceptedOrd uint64 // every batch up to this ord was accepted at least once
	durableOrd  uint64 // every batch up to this ord is durable
	err         error  // set when the window gave up; it then holds its batches for the report

	// refused is the code of the last retriable refusal of a data request since the last
	// success (wire.CodeNone when none), and refusals counts them: the driver backs off
	// by the count, and a caller that gives up waiting learns why (a full disk, say).
	refused  wire.Code
	refusals int

	// newer is a topic version above version that the window learned of (an
	// expansion): it drains (window_drain.go). refusedFrom is set once a partition of a
	// newer version refused its first batch: it holds nothing of what the window holds.
	newer       uint32
	refusedFrom bool
}

func newWindow(sh *winShared, part int, version uint32, pid int64) *window {
	return &window{sh: sh, part: part, version: version, pid: pid, ckpt: -1, nextOrd: 1}
}

// sealAt is when the open batch has lingered enough to be sealed and sent: a linger after
// the producer's last request before the batch began, but no later than a linger after
// the batch's first record, and no sooner than that record. Linger bounds how often the
// producer sends lingered batches, not how long each record waits: a batch begun when
// the producer had been idle for a linger goes out at once (the first records of a
// burst, every record of a sparse stream: at 100 records/s with the default 5 ms linger
// each record waited 5 ms for company that never came), while under load, where a batch
// begins as the last one leaves, batches still gather a linger's worth (or an answer's
// worth, lingerInflight). Linux's TCP autocorking, in spirit.
//
// Why the producer's last request and not the partition's: keyless records stick to one
// partition until its batch closes (route.go), so under load each partition idles while
// the others take their turn. Timed from its own last request, every sticky batch would
// close as it opened, a record or two each, and keyless records would hop partitions at
// the sender's pace instead of the linger's. And why the request before the batch began,
// not the latest: batches begun in the same idle spell (records into several partitions
// at once) all go at once, not only the first one the sender reaches.
func (w *window) sealAt() int64 {
	return max(w.openFirst, addSat(min(w.openFirst, w.openAfter), w.sh.linger))
}

// addSat returns t+d (d >= 0), or never when that does not fit: a linger of years means
// batches sealed by size alone, not a time that wraps into the past.
func addSat(t, d int64) int64 {
	if t > never-d {
		return never
	}
	return t + d
}

// add appends a record to the open batch, first sealing that batch if the record would
// take it past the batch size. It reports whether the driver should be woken: a batch was
// started (its linger runs) or sealed. now is the windows' clock, or negative when the
// caller did not read it: add reads it (sh.clock) only if it opens a batch, the one
// use it has, so that records that bring their own timestamp cost one clock read per
// batch, not one each.
func (w *window) add(r *Record, logical uint16, ts, now int64) (wake bool) {
	if w.open && w.bld.LenWith(ts, r.Key, r.Value, r.Headers...) > w.sh.batchBytes {
		w.seal()
		wake = true
	}
	if !w.open {
		if now < 0 {
			_, mono := w.sh.clock.now()
			now = int64(mono)
		}
		if int(w.seq) > math.MaxInt32-w.sh.batchBytes { // a batch holds at most batchBytes records
			w.pid, w.seq = w.sh.newPID(), 0 // a new sequence stream rather than a wrap
		}
		w.bld.Reset(w.sh.getBuf(w.buildHint()), w.pid, w.seq)
		w.bld.SetLayout(uint16(w.version))  // the low 16 bits: docs/format.md §1
		w.sh.buffered += int64(w.bld.Len()) // the header
		w.open, w.openFirst, w.openAfter, wake = true, now, w.sh.lastSend, true
	}
	before := w.bld.Len()
	w.bld.Add(logical, ts, r.Key, r.Value, r.Headers...)
	w.sh.buffered += int64(w.bld.Len() - before)
	if r.Progress > 0 && w.openProg == nil {
		w.openProg = make([]int64, w.bld.Count()-1, w.bld.Count()+64)
	}
	if w.openProg != nil {
		w.openProg = append(w.openProg, max(r.Progress, 0))
	}
	if w.bld.Len() >= w.sh.batchBytes {
		w.seal()
		wake = true
	}
	return wake
}

// buildHint is the size of the buffer the next batch is built in: twice a recent maximum
// (lastLen, seal), at most the largest batch. A batch that outgrows its buffer is copied
// as it grows (batch.Builder's grow), and one that fills little of it costs nothing but
// memory, bounded by compaction (seal): at 300 000 records/s into one partition, with
// the maximum alone, the growth copies were 3-4 % of the producing process's CPU; with
// twice, about 1 %.
func (w *window) buildHint() int {
	return min(2*w.lastLen, w.sh.batchBytes+w.sh.batchBytes/8)
}

// seal finishes the open batch (compressing it) and queues it. It reports whether there
// was one.
func (w *window) seal() bool {
	if !w.open {
		return false
	}
	before, n := w.bld.Len(), w.bld.Count()
	// The next batch is built in a buffer sized from recent batches (buildHint): a
	// maximum that shrinks by an eighth a batch, so that a partition alternating big and
	// small batches builds each big one in a buffer of its size instead of growing one.
	w.lastLen = max(before, w.lastLen-w.lastLen/8)
	// The batch stays in the buffer it was built in, which may be far larger (compressed,
	// or small after big ones: a zstd batch of 12 KiB in 128 KiB, 1 KiB in 1.1 MiB), until
	// a checkpoint releases it, in a few milliseconds when the broker keeps up. Copying
	// every such batch into a buffer of its size at once, as the producer did, moved half
	// of all the bytes produced a second time at 300 000 records/s into one partition
	// (batches cut by linger at sizes that swing by more than twice): the copy now waits
	// until the held buffers pass twice MaxBufferedBytes (compact).
	buf := w.sh.comp.Finish(&w.bld, w.sh.codec)
	b := &pbatch{buf: buf, count: n, pid: w.pid, ord: w.nextOrd, prog: w.openProg, base: -1, last: -1, opened: w.openFirst}
	for _, p := range b.prog {
		if p > 0 && (b.minProg == 0 || p < b.minProg) {
			b.minProg = p
		}
	}
	w.sh.buffered += int64(len(buf) - before)
	w.sh.pinned += int64(cap(buf))
	w.nextOrd++
	w.seq += int32(n)
	w.open, w.openProg = false, nil
	w.q = append(w.q, b)
	if w.sh.pinned > w.sh.compactAt {
		w.sh.compact(w)
	}
	return true
}

// compact copies the held batches whose buffers are over twice their size (and over the
// smallest class) into buffers of their size, in every window (w's alone without a
// producer), and recycles the big ones: a held batch then pins at most twice its bytes,
// so the memory held is within twice MaxBufferedBytes. A batch a request being written
// points at keeps its buffer. The next compaction waits until pinned grows by an eighth
// of the limit again, so that batches which cannot be moved yet do not make every seal
// scan the windows.
func (sh *winShared) compact(w *window) {
	if sh.compactAll != nil {
		sh.compactAll()
	} else {
		w.compact()
	}
	sh.compactAt = max(sh.pinLimit, sh.pinned+sh.pinLimit/8)
}

// compact is winShared.compact for the batches of one window.
func (w *window) compact() {
	for _, b := range w.q {
		if b.writing > 0 || cap(b.buf) <= minBatchBuf || cap(b.buf) <= 2*len(b.buf) {
			continue
		}
		held := w.sh.getBuf(len(b.buf))
		if cap(held) > max(2*len(b.buf), minBatchBuf) {
			// A class keeps buffers of up to twice its size (bufpool.go put): one that
			// large would not bound this batch, nor lower pinned. Found by review.
			w.sh.putBuf(held)
			held = make([]byte, 0, len(b.buf))
		}
		held = append(held, b.buf...)
		w.sh.pinned += int64(cap(held) - cap(b.buf))
		w.sh.putBuf(b.buf)
		b.buf = held
	}
}

// unpin takes a batch's buffer out of pinned as the batch stops counting in buffered.
func (sh *winShared) unpin(b *pbatch) {
	sh.pinned -= int64(cap(b.buf))
	if sh.pinned <= sh.pinLimit {
		sh.compactAt = sh.pinLimit
	}
}

// lastOrd is the ord of the newest batch, counting the open one as if sealed.
func (w *window) lastOrd() uint64 {
	if w.open {
		return w.nextOrd
	}
	return w.nextOrd - 1
}

// canSend reports whether a data request may go out now.
func (w *window) canSend(now int64) bool {
	return w.err == nil && now >= w.notBefore && len(w.reqs) < w.sh.maxInflight &&
		(w.synced || len(w.reqs) == 0)
}

// nextRequest fills r with the next data request, if one may and should go out now: the
// batches not sent yet, up to the request size, after sealing the open batch if it has
// lingered long enough. Until an answer of the current epoch succeeds, one request at a
// time is in flight.
func (w *window) nextRequest(now int64, r *sendReq) bool {
	if !w.canSend(now) {
		return false
	}
	if w.sent == len(w.q) && w.open && now >= w.sealAt() && len(w.reqs) < lingerInflight {
		w.seal()
	}
	if w.sent == len(w.q) {
		return false
	}
	first := w.q[w.sent]
	*r = sendReq{epoch: w.epoch, ord: first.ord, version: w.version, session: w.session,
		pid: first.pid, batches: r.batches[:0]}
	for _, b := range w.q[w.sent:] {
		if len(r.batches) > 0 && (r.size+len(b.buf) > w.sh.requestBytes || b.pid != r.pid || w.draining()) {
			break
		}
		r.batches = append(r.batches, b)
		r.size += len(b.buf)
		b.writing++
	}
	w.reqs = append(w.reqs, inflight{ord: r.ord, n: len(r.batches)})
	w.sent += len(r.batches)
	w.sh.lastSend = now
	return true
}

// nextPoll fills r with an empty produce, if the window is idle with batches accepted but
// not durable, and no poll is in flight: its answer brings the newest checkpoint. Only
// a batch with a known offset can be released by a checkpoint (batches acknowledged
// without offsets go with a later one), so without one there is nothing to poll for, and
// polling would spin: the broker answers at once when C covers everything it has.
func (w *window) nextPoll(now int64, r *sendReq) bool {
	if w.err != nil || w.polling || w.session == 0 || w.acked == 0 || len(w.reqs) > 0 ||
		now < w.notBefore || w.q[w.acked-1].last < 0 {
		return false
	}
	w.polling = true
	*r = sendReq{epoch: w.epoch, poll: true, version: w.version, session: w.session, pid: w.pid,
		batches: r.batches[:0]}
	return true
}

// writeDone tells the window the driver no longer points at the batches of r.
func (w *window) writeDone(r *sendReq) {
	for _, b := range r.batches {
		b.writing--
		if b.released && b.writing == 0 {
			w.sh.putBuf(b.buf)
			b.buf = nil
		}
	}
}

// wakeAt returns when the driver must call nextRequest again without being woken by an
// answer or a new record: at the end of a busy delay, or when the open batch has lingered
// enough. never when only an answer can make progress.
func (w *window) wakeAt(now int64) int64 {
	switch {
	case w.err != nil:
		return never
	case now < w.notBefore:
		return w.notBefore
	case w.canSend(now) && w.sent == len(w.q) && w.open && len(w.reqs) < lingerInflight:
		return w.sealAt()
	}
	return never
}
