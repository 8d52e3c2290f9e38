package client

import (
	"math"

	"sluice/batch"
	"sluice/codec"
)

// cursor is where the reading of one partition stands.
type cursor struct {
	// next is the next offset wanted: every offset below it was delivered or passed.
	next int64
	// skipOlder, while skipping is set, makes the next batch started pass its records
	// stamped before it, until one is not: a consumer starting at a time fetches from the
	// first batch whose max timestamp is at or after the time (list_offsets) and drops
	// the older records at its head.
	skipOlder int64
	skipping  bool
}

// recordIter walks the records of a fetch answer (whole batches back to back): it checks
// that the batches' offsets are dense and continue where reading stands (see nextBatch),
// checks each batch (CRC, unless the fetcher did: verified), decompresses it, skips the
// records below the position and those whose logical id is outside [lo, hi], and
// advances the position past every record it passes. It allocates nothing per record,
// nor per batch once the decompressor's buffer has grown. Used by one goroutine at a
// time.
type recordIter struct {
	lo, hi  uint16
	topic   string // for errors
	part    int    // for errors
	dec     codec.Decompressor
	it      batch.Iter
	records []byte // batches not started yet
	// verified is how many bytes at the start of records are batches whose CRC was
	// checked already (by the fetcher: verifyBatches); they are iterated without it.
	verified int
	cur      *cursor // the partition's position
	started  bool    // a batch of this answer was started
	older    int64   // records stamped before this are passed (start at a time)
	rec      *batch.Record
	err      error
	// after is the offset after the batch being iterated once its CRC matched; -1 before.
	// Its base offset is outside the CRC: confirmed says the batch before it in the
	// answer ended right before it (a *BatchError's Next, see fail).
	after     int64
	confirmed bool
	// limit and stamp bound the partition's delivery (an expansion's gate, layout.go):
	// a batch at or past limit, or stamped with a layout newer than stamp (0: any), is not
	// started; held says the iteration stopped there, stale that it was for the stamp.
	limit       int64
	stamp       uint16
	held, stale bool
}

// reset starts iterating records, the batches of one fetch answer for the offset
// cur.next, advancing cur.
func (ri *recordIter) reset(records []byte, cur *cursor) {
	ri.records, ri.cur, ri.rec, ri.err, ri.verified, ri.after = records, cur, nil, nil, 0, -1
	ri.started, ri.older = false, math.MinInt64
	ri.limit, ri.stamp, ri.held, ri.stale = math.MaxInt64, 0, false, false
	ri.it = batch.Iter{}
}

// next moves to the next record to return; false at the end of the answer or on error.
func (ri *recordIter) next() bool {
	for {
		if ri.it.Next() {
			r := ri.it.Record()
			if r.Offset < ri.cur.next {
				continue
			}
			ri.cur.next = r.Offset + 1
			if r.Timestamp < ri.older {
				continue
			}
			ri.older = math.MinInt64
			if r.Logical < ri.lo || r.Logical > ri.hi {
				continue
			}
			ri.rec = r
			return true
		}
		if err := ri.it.Err(); err != nil {
			ri.fail(err)
			return false
		}
		if !ri.nextBatch() {
			return false
		}
	}
}

// nextBatch starts the next batch. Offsets must be dense end to end: the first batch of
// an answer holds the offset asked for (base <= next <= last), and every later batch
// starts right after the one before (base == next, the previous batch's last + 1). A
// batch's base offset is outside its CRC, so a damaged one is caught here, never skipped:
// the iteration stops with a *GapError before any record of the batch.
func (ri *recordIter) nextBatch() bool {
	ri.rec, ri.after = nil, -1
	if len(ri.records) == 0 {
		return false
	}
	h, err := batch.ParseHeader(ri.records)
	if err == nil && h.Size() > len(ri.records) {
		err = batch.ErrShort
	}
	if err != nil {
		ri.fail(err)
		return false
	}
	want, base, last := ri.cur.next, h.BaseOffset, h.LastOffset()
	if (!ri.started && (base > want || last < want)) || (ri.started && base != want) {
		ri.stop(&GapError{Topic: ri.topic, Partition: ri.part, Expected: want, Base: base, Last: last, First: !ri.started})
		return false
	}
	if base >= ri.limit || (ri.stamp != 0 && batch.NewerLayout(h.Layout, ri.stamp)) {
		ri.held, ri.stale = true, base < ri.limit
		ri.records, ri.rec = nil, nil
		return false
	}
	b := ri.records[:h.Size()]
	ri.records = ri.records[h.Size():]
	// The CRC is checked apart from the records, so that a batch whose records cannot be
	// read but whose header can be trusted tells where it ends (BatchError.Next).
	if ri.verified >= len(b) {
		ri.verified -= len(b)
	} else {
		ri.verified = 0
		if _, err := batch.Check(b); err != nil {
			ri.fail(err)
			return false
		}
	}
	ri.after, ri.confirmed = last+1, ri.started
	if err := ri.dec.IterVerified(&ri.it, b); err != nil {
		ri.fail(err)
		return false
	}
	if ri.cur.skipping {
		ri.older, ri.cur.skipping = ri.cur.skipOlder, false
	}
	ri.started = true
	return true
}

// fail stops the iteration on a batch that cannot be read. Where the batch ends (Next)
// is given only when its CRC matched and two offsets stored apart agree on it: the end of
// the batch before it in the answer and its base, or its end and the base of the batch
// after it. The first batch of an answer is only checked to hold the offset asked for,
// so a damaged base (outside the CRC) would otherwise point Next past its true end,
// into the records of the next batch.
func (ri *recordIter) fail(err error) {
	next := ri.after
	if next >= 0 && !ri.confirmed {
		if h, herr := batch.ParseHeader(ri.records); herr != nil || h.BaseOffset != next {
			next = -1
		}
	}
	ri.stop(&BatchError{Topic: ri.topic, Partition: ri.part, Offset: ri.cur.next, Next: next, Err: err})
}

// stop ends the iteration with err: nothing after it is returned.
func (ri *recordIter) stop(err error) {
	ri.err = err
	ri.records, ri.rec = nil, nil
	ri.it = batch.Iter{}
}
