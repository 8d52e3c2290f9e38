package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"sluice/batch"
	"sluice/memarena"
	"sluice/persist"
)

// ProduceResult answers a produce request.
type ProduceResult struct {
	Window
	// Base and Last are the offsets of the first and last record of the request's batches
	// (for duplicates, the offsets they got the first time); -1 when the request was empty
	// or only held batches older than the dedup window.
	Base, Last int64
	// Duplicates counts batches that were already in the log and were not appended again.
	Duplicates int
	// Appended counts batches appended by this request (a failed request may have
	// appended a prefix), and AppendedBytes their bytes.
	Appended      int
	AppendedBytes int
}

// Target returns the offset C must cover before the request is durable: its last offset,
// or, for an empty produce or one of old duplicates only, everything accepted so far.
func (r *ProduceResult) Target() int64 {
	if r.Base < 0 {
		return r.Next - 1
	}
	return r.Last
}

// Produce checks the window and appends the request's batches, copying each from batches
// to its place in the arena's write buffer (the one copy of a produced byte; its base
// offset is stamped into batches first). An empty request only reports the window. Every
// batch is validated (header, CRC, producer sequence) before any is appended, so a
// request is appended whole or not at all (a full arena refuses it before its first
// batch: hold), except that a refusal midway leaves a prefix appended (reported in the
// result with the error): the disk full at a roll, or a request larger than the write
// buffer can hold at once refused by a full arena.
//
// Produce is the append domain's: safe from any goroutine (event loops call it with the
// request still in their socket buffer), serialized by the partition's append lock,
// which it holds for memory work only. It wakes nothing: when anything was appended and
// FetchesParked says long polls wait, the driver calls DataArrived on the owner.
//
// Errors: *WindowError, ErrDamaged, ErrInvalidBatch, ErrOutOfOrderSequence,
// memarena.ErrFull (the throttle: nothing more was appended; retry after the checkpoint
// advances), persist.ErrNoSpace (the disk has no room for the next segment file),
// persist.ErrFailed (a write failed: the partition takes no more until it is reloaded).
func (p *Partition) Produce(v uint32, s uint64, batches []byte, now time.Time) (ProduceResult, error) {
	res := ProduceResult{Base: -1, Last: -1}
	err := p.produceLocking(v, s, batches, now, &res)
	res.Window = p.Window()
	return res, err
}

// produceLocking runs produce under the append lock, released even if produce panics
// (the driver recovers panics per request: the partition must stay usable).
//
// The checks whose cost grows with the request's bytes (each batch's CRC and, unless
// the producers are trusted, its records: a compressed batch is decompressed) read the
// request alone, no partition state, so they run first, outside the lock. Under it they
// would stall every other appender of the partition (another event loop's producers)
// for as long as the largest request took to check: milliseconds for a 64 MiB batch to
// decompress. What is left under the lock is the sequences, the placing and the copy.
// A request the window or the partition's damage will refuse (a resend after a restart,
// an older layout's drain) is not checked first: that would spend the check on a
// refusal. What is read here only decides whether to check first; produce checks under
// the lock whatever this skipped and the lock then lets through.
func (p *Partition) produceLocking(v uint32, s uint64, batches []byte, now time.Time, res *ProduceResult) error {
	var pre precheck
	if p.windowOpen(v, s) {
		pre.done = true
		pre.at, pre.err = p.checkBatches(v, batches)
	}
	p.app.Lock()
	defer p.app.Unlock()
	return p.produce(v, s, batches, now, res, pre)
}

// windowOpen reports, without the lock, whether a request of version v and session s
// would pass CheckWindow and the damage check now. A partition frozen for a switch
// passes: it still acknowledges duplicates, and their checks stay out of the lock (a
// review found them run under it when the frozen flag was read here too).
func (p *Partition) windowOpen(v uint32, s uint64) bool {
	return v == p.version.Load() && (s == 0 || s == p.session) && p.damage.Load() == nil
}

// precheck is checkBatches's verdict on a request, taken before the append lock: done is
// false when it was not taken; err is the first batch's refusal, at byte at of the
// request (len(batches) when none).
type precheck struct {
	done bool
	at   int
	err  error
}

// FetchesParked reports whether long polls are parked: an appender that appended asks
// the owner to wake them (DataArrived). Safe from any goroutine; see fetchParked.
func (p *Partition) FetchesParked() bool { return p.ParkedFetches() > 0 }

// ParkedFetches returns how many long polls are parked here. Safe from any goroutine;
// see fetchParked.
func (p *Partition) ParkedFetches() int64 { return p.fetchParked.Load() }

func (p *Partition) produce(v uint32, s uint64, batches []byte, now time.Time, res *ProduceResult, pre precheck) error {
	if v < p.version.Load() && len(batches) > 0 {
		return p.drain(batches, res) // an older layout's resend: acknowledged or refused, never appended
	}
	if err := p.CheckWindow(v, s); err != nil {
		return err
	}
	if err := p.Damage(); err != nil && len(batches) > 0 {
		return err
	}
	if !pre.done { // the window opened under the precheck's feet: rare, so here
		pre.at, pre.err = p.checkBatches(v, batches)
	}
	// The first batch that fails either check names the refusal, as when each batch was
	// checked whole in turn: a sequence gap before a corrupt batch is the gap.
	if err := p.checkSequences(batches[:pre.at]); err != nil {
		return err
	}
	if pre.err != nil {
		return pre.err
	}
	if release, err := p.hold(batches); err != nil {
		return err
	} else if release {
		defer p.buf.Release()
	}
	for rest := batches; len(rest) > 0; {
		h, _ := batch.ParseHeader(rest) // validated above
		b := rest[:h.Size()]
		rest = rest[h.Size():]
		base, last, dup, err := p.appendOne(&h, b, now)
		if err != nil {
			return err
		}
		if dup {
			res.Duplicates++
		} else if base >= 0 {
			res.Appended++
			res.AppendedBytes += len(b)
		}
		if base >= 0 && res.Base < 0 {
			res.Base = base
		}
		if last >= 0 {
			res.Last = last
		}
	}
	return nil
}

// hold makes room in the write buffer for every batch of the request that is not a
// duplicate, when there are several, before the first is placed: so that a full arena
// refuses the request whole (busy, nothing appended, as the protocol says, so that a
// producer without an id may send it again) rather than after a prefix of it, which such
// a producer's resend would append twice (a review found the log holding a request's
// first batches six times after five busy answers). It reports whether the caller must
// Release the room. A request larger than the buffer can ever hold at once
// (arena.partition_max, padding counted) is appended batch by batch, as the persister
// frees room, and may still be refused midway with a prefix appended (reported in the
// answer); so may one that fills the disk (persist.ErrNoSpace at a roll), and one that
// rolls segments more than twice. One batch needs no hold: appendOne reserves its room.
// Requires p.app.
func (p *Partition) hold(batches []byte) (release bool, err error) {
	if p.app.frozen {
		return false, nil // appendOne refuses it (ErrSwitching: route again), not the arena
	}
	if h, _ := batch.ParseHeader(batches); h.Size() >= len(batches) {
		return false, nil // one batch (most requests): no map lookup under the lock
	}
	n, size := 0, int64(0)
	for pos := 0; pos < len(batches); {
		h, _ := batch.ParseHeader(batches[pos:]) // checked by checkBatches
		pos += h.Size()
		if idempotent(&h) {
			if v, _ := p.app.producers[h.ProducerID].check(&h); v == seqDuplicate || v == seqOld {
				continue
			}
		}
		n, size = n+1, size+int64(h.Size())
	}
	if n < 2 {
		return false, nil
	}
	// Padding for two rolls at most (by age at the first batch, by size once): a request
	// that fills more than one segment (segments smaller than half of it) may find its
	// held room short at a third and be refused there, a prefix appended, as before. A
	// pad for every batch held 4 KiB a batch, and kept a request of small batches from a
	// partition whose room it did fit (a review).
	switch err := p.buf.Hold(size, int64(min(n, 2))*(blockSize-1)); {
	case err == nil:
		return true, nil
	case errors.Is(err, memarena.ErrTooLarge):
		return false, nil // batch by batch; each is checked on its own
	default:
		return false, err
	}
}

// checkBatches checks every batch of a request on its own (header and CRC, its layout
// stamp against v, the request's topic version, its records with p.records and, for a
// stamped batch, their logical ids against the range the partition serves at v, and
// that its sequences do not wrap), without the append lock: it reads the request only.
// It returns the first refusal and the byte of the request its batch starts at
// (len(batches) when none).
func (p *Partition) checkBatches(v uint32, batches []byte) (int, error) {
	lr := p.logical.Load()
	for pos := 0; pos < len(batches); {
		h, err := batch.Check(batches[pos:])
		if err == nil && batch.NewerLayout(h.Layout, uint16(v)) {
			// Its records were routed by a layout this partition does not serve, and every
			// consumer reaching it would wait for that layout to appear.
			err = fmt.Errorf("the batch is stamped with layout %d, newer than the request's topic version %d", h.Layout, v)
		}
		if err == nil && p.records != nil { // last: the one check whose cost grows with the records
			lo, hi := 0, 1<<16 // every logical id a record can have
			if h.Layout != 0 && lr != nil && lr.version == v {
				// A range of another version holds nothing. It can only be a newer one (a
				// Switch stores the range before the version, so a request that read v
				// reads v's range or a later one); the window then refuses the request
				// under the lock.
				lo, hi = lr.lo, lr.hi
			}
			err = p.records.check(&h, batches[pos:pos+h.Size()], lo, hi)
		}
		if err != nil {
			return pos, fmt.Errorf("%w at byte %d of the request: %w", ErrInvalidBatch, pos, err)
		}
		if idempotent(&h) && seqWraps(&h) {
			return pos, fmt.Errorf("%w at byte %d of the request: producer %d's batch of %d records at sequence %d reaches %d, the end of its sequences (take a new producer id rather than wrap)",
				ErrInvalidBatch, pos, h.ProducerID, h.Count, h.BaseSequence, math.MaxInt32)
		}
		pos += h.Size()
	}
	return len(batches), nil
}

// checkSequences checks that the producers' sequences continue, in batches that
// checkBatches passed, without changing anything. Requires p.app.
func (p *Partition) checkSequences(batches []byte) error {
	// Sequences continue across the batches of one request too: track the last seen per
	// producer. A request carries one producer's batches (the client's), so a few
	// entries on the stack, searched in order, do where a map was allocated for every
	// request (1.3 MB/s of the broker's allocation at 10 000 records/s).
	var seen [4]pendingSeq
	pending := seen[:0]
	for pos := 0; pos < len(batches); {
		h, _ := batch.ParseHeader(batches[pos:]) // checked by checkBatches
		if idempotent(&h) {
			i := slices.IndexFunc(pending, func(s pendingSeq) bool { return s.producer == h.ProducerID })
			if i >= 0 {
				if last := pending[i].last; h.BaseSequence != last+1 {
					return fmt.Errorf("%w: producer %d sent %d after %d in one request", ErrOutOfOrderSequence, h.ProducerID, h.BaseSequence, last)
				}
			} else if verdict, _ := p.app.producers[h.ProducerID].check(&h); verdict == seqGap {
				if ps := p.app.producers[h.ProducerID]; ps.exhausted() {
					return fmt.Errorf("%w: producer %d sent sequence %d after %d, at the end of its sequences (take a new producer id rather than wrap)",
						ErrOutOfOrderSequence, h.ProducerID, h.BaseSequence, ps.lastSeq())
				}
				return fmt.Errorf("%w: producer %d sent sequence %d, expected %d", ErrOutOfOrderSequence,
					h.ProducerID, h.BaseSequence, p.app.producers[h.ProducerID].lastSeq()+1)
			}
			if i < 0 {
				pending = append(pending, pendingSeq{producer: h.ProducerID})
				i = len(pending) - 1
			}
			pending[i].last = h.BaseSequence + int32(h.Count) - 1
		}
		pos += h.Size()
	}
	return nil
}

// pendingSeq is a producer's last sequence in the batches of a request validated so far.
type pendingSeq struct {
	producer int64
	last     int32
}

// appendOne appends one validated batch, unless it is a duplicate: the store places it
// (its offset, its segment and its position in that segment's file: no I/O), and the
// write buffer takes a copy at the same position of its stream. The store writes it
// later, from the buffer (Persist). Requires p.app.
func (p *Partition) appendOne(h *batch.Header, b []byte, now time.Time) (base, last int64, dup bool, err error) {
	if idempotent(h) {
		switch verdict, prev := p.app.producers[h.ProducerID].check(h); verdict {
		case seqDuplicate:
			return prev.base, prev.last, true, nil
		case seqOld:
			return -1, -1, true, nil
		}
	}
	if p.app.frozen {
		return -1, -1, false, ErrSwitching
	}
	// Room in the write buffer first (for the batch and the padding a roll may put
	// before it), so that a full arena or a batch the buffer can never hold is refused
	// before the store places it: the copy below then cannot fail, and nothing placed
	// ever lacks its bytes.
	if err := p.buf.Reserve(int64(len(b)), blockSize-1); err != nil {
		return -1, -1, false, err
	}
	pl, err := p.store.Place(*h, int64(len(b)), now)
	if err != nil {
		p.buf.Unreserve()
		return -1, -1, false, err
	}
	base, last = pl.Base, pl.Base+int64(h.Count)-1
	batch.SetBaseOffset(b, base)
	if err := p.copyIn(b, pl, last); err != nil {
		// Reserve checked the size and holds the room, and the buffer closes only once
		// no appender runs: nothing else can refuse the bytes.
		panic(fmt.Sprintf("BUG: engine: %s/%d: the write buffer refused a reserved batch at %d: %v", p.topic, p.id, base, err))
	}
	p.advanceEnd(last + 1) // readable now: see Partition.end
	p.remember(h, base, last)
	return base, last, false, nil
}

// copyIn copies batch b to the place pl in the write buffer: a new segment starts at the
// next multiple of the block size in the stream, so that its file's blocks are aligned
// arena memory (docs/writepath.md §1). Requires p.app and the room Reserve made.
func (p *Partition) copyIn(b []byte, pl persist.Placement, last int64) error {
	if pl.Roll {
		p.app.segs = append(p.app.segs, segStart{seg: pl.Segment, start: alignUp(p.buf.Tail(), blockSize)})
	}
	cur := p.app.segs[len(p.app.segs)-1]
	want := cur.start + pl.Pos
	if pl.Pos == 0 && p.buf.Tail() < want {
		if err := p.buf.Skip(want); err != nil {
			return err
		}
	}
	if pl.Segment != cur.seg || want != p.buf.Tail() {
		panic(fmt.Sprintf("BUG: engine: %s/%d placed at segment %d position %d, buffer at stream %d (segment %d starts at %d)",
			p.topic, p.id, pl.Segment, pl.Pos, p.buf.Tail(), cur.seg, cur.start))
	}
	return p.buf.Append(b, pl.Base, last)
}

// blockSize is the alignment of direct I/O that segments start at in the stream.
const blockSize = 4096

// alignUp rounds n up to a multiple of the power of two a.
func alignUp(n, a int64) int64 { return (n + a - 1) &^ (a - 1) }
