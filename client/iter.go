package client

import (
	"fmt"

	"sluice/batch"
	"sluice/codec"
)

// recordIter walks the records of a fetch answer (whole batches back to back): it checks
// each batch (CRC), decompresses it, skips the records below the position and those whose
// logical id is outside [lo, hi], and advances the position past every record it passes.
// It allocates nothing per record, nor per batch once the decompressor's buffer has
// grown. Used by one goroutine at a time.
type recordIter struct {
	lo, hi  uint16
	dec     codec.Decompressor
	it      batch.Iter
	records []byte // batches not started yet
	pos     *int64 // the partition's next offset
	rec     *batch.Record
	err     error
}

// reset starts iterating records, advancing *pos.
func (ri *recordIter) reset(records []byte, pos *int64) {
	ri.records, ri.pos, ri.rec, ri.err = records, pos, nil, nil
	ri.it = batch.Iter{}
}

// next moves to the next record to return; false at the end of the answer or on error.
func (ri *recordIter) next() bool {
	for {
		if ri.it.Next() {
			r := ri.it.Record()
			if r.Offset < *ri.pos {
				continue
			}
			*ri.pos = r.Offset + 1
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

// nextBatch starts the next batch that holds records at or after the position.
func (ri *recordIter) nextBatch() bool {
	for len(ri.records) > 0 {
		h, err := batch.ParseHeader(ri.records)
		if err == nil && h.Size() > len(ri.records) {
			err = batch.ErrShort
		}
		if err != nil {
			ri.fail(err)
			return false
		}
		b := ri.records[:h.Size()]
		ri.records = ri.records[h.Size():]
		if h.LastOffset() < *ri.pos {
			continue
		}
		if err := ri.dec.Iter(&ri.it, b); err != nil {
			ri.fail(err)
			return false
		}
		return true
	}
	ri.rec = nil
	return false
}

func (ri *recordIter) fail(err error) {
	ri.err = fmt.Errorf("cannot read fetched batch at offset %d: %w", *ri.pos, err)
	ri.records, ri.rec = nil, nil
	ri.it = batch.Iter{}
}
