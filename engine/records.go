package engine

import (
	"fmt"
	"sync"

	"sluice/batch"
	"sluice/codec"
)

// RecordChecker checks the records of produced batches before they are stored: that the
// records section decompresses (for a compressed batch) to the size its header gives,
// and holds exactly the header's count of well-formed records, one with the header's
// max timestamp among them. The CRC only shows that a batch arrived as its producer
// sealed it; a batch sealed over a bad section (a producer's bug, or a hostile one)
// would otherwise be stored and acknowledged, and every consumer reaching it would stop
// there for good, since no reader skips a batch it cannot read. Kafka's broker checks
// its batches' records the same way.
//
// The cost is a walk over each record's fields (no copy, no allocation) and, for a
// compressed batch, its decompression into a pooled buffer: the one piece of
// per-record work on the produce path (BENCHMARKS.md measures it), which a broker whose
// producers are all trusted turns off (broker.Config.TrustRecords).
//
// One RecordChecker serves every partition of a broker, from any goroutine: the
// decompressors (each with a buffer as large as the largest section it decompressed, up
// to a batch's 64 MiB, and a zstd decoder) are pooled, so the memory they hold follows
// how many appends decompress at once, not how many partitions take compressed batches.
type RecordChecker struct {
	decompressors sync.Pool
	// probe, when set (tests only), is called at the start of every check: a test sees
	// from it where a check runs (outside the partition's append lock).
	probe func()
}

// NewRecordChecker returns a RecordChecker.
func NewRecordChecker() *RecordChecker {
	return &RecordChecker{decompressors: sync.Pool{New: func() any { return new(codec.Decompressor) }}}
}

// check checks the records of b, a whole batch whose header h batch.Check returned, and
// that every record's logical id is in [lo, hi) (0 and 1<<16: any).
func (rc *RecordChecker) check(h *batch.Header, b []byte, lo, hi int) error {
	if rc.probe != nil {
		rc.probe()
	}
	if h.Codec == batch.CodecNone {
		return walkRecords(h, h.Records(b), lo, hi)
	}
	d := rc.decompressors.Get().(*codec.Decompressor)
	defer rc.decompressors.Put(d)
	recs, err := d.Records(*h, b)
	if err != nil {
		return err
	}
	return walkRecords(h, recs, lo, hi)
}

// walkRecords decodes every record of a records section and returns the first error: a
// record that does not decode, or whose logical id is outside [lo, hi).
func walkRecords(h *batch.Header, recs []byte, lo, hi int) error {
	var it batch.Iter
	it.ResetRecords(*h, recs)
	for it.Next() {
		if r := it.Record(); int(r.Logical) < lo || int(r.Logical) >= hi {
			return fmt.Errorf("record %d (of a batch stamped with layout %d) has logical id %d, which this partition does not serve: it serves %d to %d at its topic version",
				r.Offset-h.BaseOffset, h.Layout, r.Logical, lo, hi-1)
		}
	}
	return it.Err()
}
