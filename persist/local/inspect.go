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

// Inspect reads a partition directory without changing anything and checks what Open
// trusts blindly: every batch of every segment (header, CRC, offsets continuing within
// and across segments) and each sealed segment's index files against its data. visit, if
// not nil, is called for every valid batch in offset order. Problems are returned as
// *CorruptionError (file and position), *IndexError or *ForeignFileError values; err is
// for failures to read at all. A bad batch ends the scan of its segment; the next
// segment is still checked.
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
	for i, base := range bases {
		sealed := i < len(bases)-1
		next, p, err := inspectSegment(fs, dir, base, sealed, visit)
		if err != nil {
			return problems, err
		}
		problems = append(problems, p...)
		if sealed && len(p) == 0 && next != bases[i+1] {
			problems = append(problems, &CorruptionError{File: segmentName(dir, base, logSuffix), Pos: -1, Offset: -1,
				Reason: fmt.Sprintf("segment ends at offset %d but the next segment starts at %d", next, bases[i+1])})
		}
	}
	return problems, nil
}

// batchRun records, for every batch of a segment in order, its position, base offset and
// the running maximum timestamp: what index entries must agree with.
type batchRun struct {
	pos, base, runMax []int64
}

// inspectSegment scans one segment and, when sealed, checks its index files. It returns
// the offset after the last valid batch.
func inspectSegment(fs vfs.FS, dir string, base int64, sealed bool, visit func(BatchInfo)) (int64, []error, error) {
	s := newSegment(dir, fs, nil, base)
	f, err := fs.Open(s.path)
	if err != nil {
		return 0, nil, fmt.Errorf("cannot open segment %s: %w", s.path, err)
	}
	s.install(f)
	defer s.drop()
	size, err := f.Size()
	if err != nil {
		return 0, nil, fmt.Errorf("cannot stat segment %s: %w", s.path, err)
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
	if err := sc.Err(); err != nil {
		var ce *CorruptionError
		if !errors.As(err, &ce) {
			return 0, nil, err
		}
		if !sealed {
			ce.Reason += " (the last segment: opening the log truncates it here)"
		}
		return sc.next, []error{ce}, nil
	}
	if !sealed {
		return sc.next, nil, nil
	}
	s.next = sc.next
	idx, reason := s.readIndexFiles(s.h.Load())
	if idx == nil {
		reason += " (opening the log rebuilds it)"
	} else {
		reason = run.check(idx, base, maxTs)
	}
	if reason != "" {
		return sc.next, []error{&IndexError{File: segmentName(dir, base, indexSuffix), Reason: reason}}, nil
	}
	return sc.next, nil, nil
}

// check returns why idx disagrees with the batches, or "".
func (r *batchRun) check(idx *index, segBase, maxTs int64) string {
	for i, e := range idx.offs {
		k, ok := slices.BinarySearch(r.pos, e.pos)
		if !ok || r.base[k] != segBase+int64(e.rel) {
			return fmt.Sprintf("offset index entry %d (%d at %d) does not name a batch start", i, segBase+int64(e.rel), e.pos)
		}
	}
	for i, e := range idx.times {
		k, ok := slices.BinarySearch(r.base, e.offset)
		if !ok || r.runMax[k] != e.ts {
			return fmt.Sprintf("time index entry %d (%d at offset %d) does not match the data", i, e.ts, e.offset)
		}
	}
	if last := idx.times[len(idx.times)-1]; last.ts != maxTs {
		return fmt.Sprintf("time index ends at %d, the segment's max timestamp is %d", last.ts, maxTs)
	}
	return ""
}
