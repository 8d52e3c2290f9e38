package local

import (
	"errors"
	"fmt"

	"sluice/persist/vfs"
)

// Repair is the operator's decision for a damaged partition, taken while nothing has
// the log open (the broker is stopped): cut the log at a batch boundary, giving up every
// batch from there on, acknowledged or not. PlanRepair works out what a cut removes and
// changes nothing; Apply carries it out.

// BoundaryError says that an offset is not where a batch starts, and names the nearest
// boundaries: Below is the base offset of the batch holding Offset (or the end of the
// valid data before it), Above the offset after that batch, -1 when bad data or the end
// of the segment follows Below.
type BoundaryError struct {
	Offset, Below, Above int64
}

func (e *BoundaryError) Error() string {
	if e.Above < 0 {
		return fmt.Sprintf("offset %d is not a batch boundary: the valid batches end at %d", e.Offset, e.Below)
	}
	return fmt.Sprintf("offset %d is not a batch boundary: the nearest are %d and %d", e.Offset, e.Below, e.Above)
}

// Unwrap makes errors.Is(err, ErrNotBatchBoundary) true.
func (e *BoundaryError) Unwrap() error { return ErrNotBatchBoundary }

// RepairPlan is what cutting a partition directory at an offset removes.
type RepairPlan struct {
	Dir string
	// At is the first offset removed: the offset the next batch gets after the repair.
	At int64
	// Segment is the .log cut at Pos, where the batch At (or bad data) starts; it
	// becomes the last segment, empty when Pos is 0. CutBytes are the bytes after Pos.
	Segment  string
	Pos      int64
	CutBytes int64
	// Deleted are the later .log files, deleted with their index files; DeletedBytes
	// their .log bytes.
	Deleted      []string
	DeletedBytes int64
	// End is the offset after the last valid batch found at or after At, or after the
	// old recovery point if that is higher (At when neither is): the removed range is
	// [At, End) plus whatever bad data follows.
	End int64
	// Old is the recovery point before the repair (HasOld false: none readable); New the
	// one Apply writes.
	Old    RecoveryPoint
	HasOld bool
	New    int64
	// Acknowledged counts the removed offsets at or below the old recovery point: records
	// producers were told are durable, given up. -1 without a recovery point (unknown).
	Acknowledged int64

	fs    vfs.FS
	bases []int64 // every segment's base
	index int     // of Segment in bases
}

// PlanRepair works out what cutting the partition in dir at offset at removes, without
// changing anything. at must be a batch boundary: the base offset of a batch reached
// with valid batches from the start of its segment, or the offset right after the last
// of them (where bad data starts). Otherwise the error is a *BoundaryError naming the
// nearest boundaries. at below the log's first segment is an *OffsetOutOfRangeError.
func PlanRepair(fs vfs.FS, dir string, at int64) (*RepairPlan, error) {
	if fs == nil {
		fs = vfs.Default()
	}
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("cannot list partition directory %s: %w", dir, err)
	}
	p := &RepairPlan{Dir: dir, At: at, fs: fs, Acknowledged: -1}
	for _, name := range names {
		switch kind, base := parseName(name); kind {
		case kindForeign:
			return nil, &ForeignFileError{Dir: dir, Name: name}
		case kindLog:
			p.bases = append(p.bases, base)
		}
	}
	if len(p.bases) == 0 {
		return nil, fmt.Errorf("cannot repair %s: it holds no segment", dir)
	}
	if p.index = segmentIndex(p.bases, at); p.index < 0 {
		return nil, &OffsetOutOfRangeError{Offset: at, Start: p.bases[0], End: p.bases[len(p.bases)-1]}
	}
	if p.Old, err = ReadRecoveryPoint(fs, dir); err == nil {
		p.HasOld = true
		p.New = min(p.Old.Offset, at-1)
		p.Acknowledged = max(0, p.Old.Offset-at+1)
		p.End = max(p.End, p.Old.Offset+1)
	} else {
		var ce *CorruptionError
		if !errors.Is(err, ErrNoRecoveryPoint) && !errors.As(err, &ce) {
			return nil, err
		}
		p.New = at - 1
	}
	if err := p.planCut(); err != nil {
		return nil, err
	}
	for _, base := range p.bases[p.index+1:] {
		path := segmentName(dir, base, logSuffix)
		size, err := fs.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("cannot stat segment %s: %w", path, err)
		}
		p.Deleted, p.DeletedBytes = append(p.Deleted, path), p.DeletedBytes+size
	}
	if len(p.Deleted) > 0 { // the last segment's valid end is the end of what is removed
		end, err := validEnd(fs, p.Deleted[len(p.Deleted)-1], p.bases[len(p.bases)-1])
		if err != nil {
			return nil, err
		}
		p.End = max(p.End, end)
	}
	return p, nil
}

// planCut finds where At starts in its segment, checking the batches before it.
func (p *RepairPlan) planCut() error {
	p.Segment = segmentName(p.Dir, p.bases[p.index], logSuffix)
	pos, size, err := findBoundary(p.fs, p.Segment, p.bases[p.index], p.At)
	if err != nil {
		return err
	}
	p.Pos, p.CutBytes = pos, size-pos
	end, err := validEnd(p.fs, p.Segment, p.bases[p.index])
	if err != nil {
		return err
	}
	p.End = max(p.End, end, p.At)
	return nil
}

// scanFile scans the segment at path (base offset base) from its start, calling fn for
// each valid batch until fn returns false, and returns the scanner (stopped at the first
// bad batch, the end, or where fn stopped) and the file's size. The error is for I/O.
func scanFile(fs vfs.FS, path string, base int64, fn func(sc *scanner) bool) (*scanner, int64, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("cannot open segment %s: %w", path, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, 0, fmt.Errorf("cannot stat segment %s: %w", path, err)
	}
	sc := newScanner(f, path, size, base)
	for sc.Next() && fn(sc) {
	}
	var ce *CorruptionError
	if err := sc.Err(); err != nil && !errors.As(err, &ce) {
		return nil, 0, err
	}
	return sc, size, nil
}

// validEnd returns the offset after the last valid batch of the segment at path.
func validEnd(fs vfs.FS, path string, base int64) (int64, error) {
	sc, _, err := scanFile(fs, path, base, func(*scanner) bool { return true })
	if err != nil {
		return 0, err
	}
	return sc.next, nil
}

// findBoundary returns where the batch with base offset at starts in the segment at
// path, or where bad data starts when the valid batches end exactly at at; and the
// segment's size. Otherwise the error is a *BoundaryError.
func findBoundary(fs vfs.FS, path string, base, at int64) (pos, size int64, err error) {
	sc, size, err := scanFile(fs, path, base, func(sc *scanner) bool { return sc.h.LastOffset() < at })
	switch {
	case err != nil:
		return 0, 0, err
	case sc.batch != nil && sc.h.BaseOffset == at, sc.batch == nil && sc.next == at:
		return sc.pos, size, nil
	case sc.batch != nil:
		return 0, 0, &BoundaryError{Offset: at, Below: sc.h.BaseOffset, Above: sc.h.LastOffset() + 1}
	}
	return 0, 0, &BoundaryError{Offset: at, Below: sc.next, Above: -1}
}

// Apply carries out the plan. Nothing may have the log open. The order keeps every
// crash in between safe: the recovery point is lowered first (a crash then leaves data
// above it, which Open treats as a tail), then the segment is cut and fsynced, the later
// segments are deleted newest first and the directory synced. Without a recovery point
// before, every remaining segment is fsynced and one is written last.
func (p *RepairPlan) Apply() error {
	if p.HasOld && p.New != p.Old.Offset {
		if err := writeRecoveryPoint(p.fs, p.Dir, RecoveryPoint{Offset: p.New}); err != nil {
			return err
		}
	}
	f, err := p.fs.OpenReadWrite(p.Segment)
	if err != nil {
		return fmt.Errorf("cannot open segment %s: %w", p.Segment, err)
	}
	err = f.Truncate(p.Pos)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cannot cut segment %s at %d: %w", p.Segment, p.Pos, err)
	}
	for i := len(p.bases) - 1; i > p.index; i-- {
		for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix} {
			if err := removeIfExists(p.fs, segmentName(p.Dir, p.bases[i], suffix)); err != nil {
				return err
			}
		}
	}
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} { // the new last segment's
		if err := removeIfExists(p.fs, segmentName(p.Dir, p.bases[p.index], suffix)); err != nil {
			return err
		}
	}
	if err := p.fs.SyncDir(p.Dir); err != nil {
		return fmt.Errorf("cannot sync directory %s: %w", p.Dir, err)
	}
	if p.HasOld {
		return nil
	}
	for _, base := range p.bases[:p.index] {
		if err := fsyncFile(p.fs, segmentName(p.Dir, base, logSuffix)); err != nil {
			return err
		}
	}
	return writeRecoveryPoint(p.fs, p.Dir, RecoveryPoint{Offset: p.New})
}

// fsyncFile opens path and fsyncs it.
func fsyncFile(fs vfs.FS, path string) error {
	f, err := fs.Open(path)
	if err != nil {
		return fmt.Errorf("cannot open %s: %w", path, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cannot fsync %s: %w", path, err)
	}
	return nil
}
