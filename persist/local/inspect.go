package local

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"sluice/batch"
	"sluice/persist/vfs"
)

// BatchInfo describes one batch found by Inspect.
type BatchInfo struct {
	Segment string // path of the .log file
	Pos     int64  // byte position in it
	Header  batch.Header
}

// IndexError reports an index file that does not match its segment.
type IndexError struct {
	File   string
	Reason string
}

func (e *IndexError) Error() string { return fmt.Sprintf("index %s: %s", e.File, e.Reason) }

// TornTailError is bad data that Open cuts off by itself: in the last segment, above the
// recovery point (or anywhere in it, without one). A crash leaves such a tail.
type TornTailError struct {
	Err              *CorruptionError
	RecoveryPoint    int64
	HasRecoveryPoint bool
}

func (e *TornTailError) Error() string {
	if !e.HasRecoveryPoint {
		return fmt.Sprintf("TORN TAIL of the last segment, no recovery point (opening the log cuts it off): %v", e.Err)
	}
	return fmt.Sprintf("TORN TAIL above the recovery point %d (opening the log cuts it off): %v", e.RecoveryPoint, e.Err)
}

// Unwrap returns the corruption.
func (e *TornTailError) Unwrap() error { return e.Err }

// DamageError is bad data at or below the recovery point: acknowledged data, which Open
// never cuts. In a segment that Open scans, the log opens damaged; in one it trusts,
// reads fail there. Without a recovery point, bad data in a sealed segment is reported
// as damage too (Open trusts sealed segments). Only an operator's repair removes it.
type DamageError struct {
	Err              *CorruptionError
	RecoveryPoint    int64
	HasRecoveryPoint bool
}

func (e *DamageError) Error() string {
	where := "in a sealed segment, no recovery point"
	if e.HasRecoveryPoint {
		where = fmt.Sprintf("at or below the recovery point %d: acknowledged data", e.RecoveryPoint)
	}
	return fmt.Sprintf("DAMAGE %s (repair: sluice segment repair %s --truncate-at %d): %v",
		where, dirOf(e.Err.File), e.Err.Offset, e.Err)
}

// Unwrap returns the corruption.
func (e *DamageError) Unwrap() error { return e.Err }

// Inspect reads a partition directory without changing anything and checks what Open
// trusts blindly: every batch of every segment (header, CRC, offsets continuing within
// and across segments) and each sealed segment's index files against its data. visit, if
// not nil, is called for every valid batch in offset order.
//
// Problems are returned as *TornTailError or *DamageError values (bad data, told apart by
// the recovery point exactly as Open tells them apart; both unwrap to the
// *CorruptionError naming file, position and offset), *IndexError, *ForeignFileError,
// or a *CorruptionError for an unreadable recovery point; err is for failures to read at
// all. A bad batch ends the scan of its segment; the next segment is still checked.
func Inspect(fs vfs.FS, dir string, visit func(BatchInfo)) (problems []error, err error) {
	if fs == nil {
		fs = vfs.Default()
	}
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot list partition directory %s: %w", dir, err)
	}
	var bases []int64
	for _, name := range names {
		switch kind, base := parseName(name); kind {
		case kindForeign:
			problems = append(problems, &ForeignFileError{Dir: dir, Name: name})
		case kindLog:
			bases = append(bases, base)
		}
	}
	rp, rpErr := ReadRecoveryPoint(fs, dir)
	var ce *CorruptionError
	switch {
	case rpErr == nil, errors.Is(rpErr, ErrNoRecoveryPoint):
	case errors.As(rpErr, &ce):
		problems = append(problems, ce) // Open falls back to cutting the last segment
	default:
		return problems, rpErr
	}
	classify := func(ce *CorruptionError, last bool) error {
		// As Open: only the last segment can have a torn tail (a roll makes the sealed
		// one whole first), and only above the recovery point when there is one.
		if last && (rpErr != nil || ce.Offset > rp.Offset) {
			return &TornTailError{Err: ce, RecoveryPoint: rp.Offset, HasRecoveryPoint: rpErr == nil}
		}
		return &DamageError{Err: ce, RecoveryPoint: rp.Offset, HasRecoveryPoint: rpErr == nil}
	}
	corrupt, end := false, int64(0)
	for i, base := range bases {
		sealed := i < len(bases)-1
		res, err := inspectSegment(fs, dir, base, sealed, visit)
		if err != nil {
			return problems, err
		}
		if res.corrupt != nil {
			problems, corrupt = append(problems, classify(res.corrupt, !sealed)), true
		} else if sealed && res.next != bases[i+1] {
			problems, corrupt = append(problems, classify(&CorruptionError{File: segmentName(dir, base, logSuffix), Pos: res.pos, Offset: res.next,
				Reason: fmt.Sprintf("segment ends at offset %d but the next segment starts at %d", res.next, bases[i+1])}, false)), true
		}
		problems = append(problems, res.problems...)
		end = res.next
	}
	if rpErr == nil && !corrupt && end-1 < rp.Offset {
		last := dirJoin(dir, recoveryPointName) // no segment at all
		if len(bases) > 0 {
			last = segmentName(dir, bases[len(bases)-1], logSuffix)
		}
		problems = append(problems, classify(&CorruptionError{File: last, Pos: -1, Offset: end,
			Reason: fmt.Sprintf("the log ends at offset %d, below its recovery point %d", end-1, rp.Offset)}, true))
	}
	return problems, nil
}

// batchRun records, for every batch of a segment in order, its position, base offset and
// the running maximum timestamp: what index entries must agree with.
type batchRun struct {
	pos, base, runMax []int64
}

// segmentReport is what inspectSegment found in one segment.
type segmentReport struct {
	next, pos int64            // the offset and position after the last valid batch
	corrupt   *CorruptionError // the bad batch that ended the scan, if any
	problems  []error          // index problems
}

// inspectSegment scans one segment and, when sealed and whole, checks its index files.
func inspectSegment(fs vfs.FS, dir string, base int64, sealed bool, visit func(BatchInfo)) (segmentReport, error) {
	s := newSegment(dir, fs, nil, base)
	f, err := fs.Open(s.path)
	if err != nil {
		return segmentReport{}, fmt.Errorf("cannot open segment %s: %w", s.path, err)
	}
	s.install(f)
	defer s.drop()
	size, err := f.Size()
	if err != nil {
		return segmentReport{}, fmt.Errorf("cannot stat segment %s: %w", s.path, err)
	}
	s.size = size
	var run batchRun
	maxTs := int64(math.MinInt64)
	sc := newScanner(f, s.path, size, base)
	for sc.Next() {
		maxTs = max(maxTs, sc.h.MaxTimestamp)
		run.pos, run.base, run.runMax = append(run.pos, sc.pos), append(run.base, sc.h.BaseOffset), append(run.runMax, maxTs)
		if visit != nil {
			visit(BatchInfo{Segment: s.path, Pos: sc.pos, Header: sc.h})
		}
	}
	rep := segmentReport{next: sc.next, pos: sc.pos}
	if err := sc.Err(); err != nil {
		if !errors.As(err, &rep.corrupt) {
			return segmentReport{}, err
		}
		return rep, nil
	}
	if !sealed {
		return rep, nil
	}
	s.next = sc.next
	idx, suffix, reason := s.readIndexPair(s.h.Load())
	if idx == nil {
		reason += " (opening the log rebuilds it)"
	} else {
		suffix, reason = run.check(idx, base, maxTs)
	}
	if reason != "" { // naming the file at fault (it named the offset index for both)
		rep.problems = []error{&IndexError{File: segmentName(dir, base, suffix), Reason: reason}}
	}
	return rep, nil
}

// check returns why idx disagrees with the batches, and the suffix of the index file
// at fault; "", "" when it agrees.
func (r *batchRun) check(idx *index, segBase, maxTs int64) (suffix, reason string) {
	for i, e := range idx.offs {
		k, ok := slices.BinarySearch(r.pos, e.pos)
		if !ok || r.base[k] != segBase+int64(e.rel) {
			return indexSuffix, fmt.Sprintf("offset index entry %d (%d at %d) does not name a batch start", i, segBase+int64(e.rel), e.pos)
		}
	}
	for i, e := range idx.times {
		k, ok := slices.BinarySearch(r.base, e.offset)
		if !ok || r.runMax[k] != e.ts {
			return timeIndexSuffix, fmt.Sprintf("time index entry %d (%d at offset %d) does not match the data", i, e.ts, e.offset)
		}
	}
	if last := idx.times[len(idx.times)-1]; last.ts != maxTs {
		return timeIndexSuffix, fmt.Sprintf("time index ends at %d, the segment's max timestamp is %d", last.ts, maxTs)
	}
	return "", ""
}
