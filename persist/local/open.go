package local

import (
	"errors"
	"fmt"

	"sluice/batch"
)

// Open opens the log in dir, creating the directory and a first segment if needed, and
// recovers it.
//
// Recovery trusts what the recovery point covers and checks the rest. The recovery
// point R (docs/format.md §2) says every batch up to offset R was durable when it was
// written. Segments that hold only offsets at or below R are trusted: listed, not read
// (their headers are checked when first served). The segment holding R+1 and every later
// one are scanned from their start, checking each batch's header, CRC and offset
// continuity, and that each segment ends where the next begins. At the first batch that
// fails:
//
//   - above R in the last segment, it is a torn tail (a crash cut the log short): the
//     segment is truncated there;
//   - at or below R, or in a segment that has a successor (a roll made it whole, fsynced
//     under every policy, before the next began: no crash tears it), acknowledged data
//     is corrupt: the log opens damaged. Nothing is
//     truncated or deleted; Damage returns the *CorruptionError, the log ends at it
//     (reads below are served, reads at or past it fail with it) and writes fail with
//     ErrDamaged until an operator repairs the directory (`sluice segment repair`).
//
// A log that ends below R without a bad batch (a segment file cut short or missing) is
// damaged too. Without a readable recovery point (an older directory, or a crash before
// the first one was written, in a partition's first 30 s) Open scans every segment, as
// if R were below the first: bad data in a sealed segment is damage, in the last one a
// torn tail, and it says so in the log. (It scanned the last segment only, trusting the
// sealed ones unread: a review found a bit flipped in a young partition's sealed
// segment served to consumers, which stopped at its CRC, while `sluice segment verify`
// called it damage.)
//
// Segment files are preallocated and their last block zero-padded, so the data of a
// segment ends at the first zeros where a batch header should be (or at the end of the
// file): that is a clean end, not corruption. A log that opens healthy then cuts its
// last segment's file at the end of its data (dropping a torn tail and anything a torn
// write left after it), preallocates it again, and opens it for writing; scanned sealed
// segments whose files run past their data are cut to it. Tail says where the next
// batch goes.
//
// Open then fsyncs what it scanned and records the recovered end as the new recovery
// point (under SyncNever only when that end is above the old record). An I/O error
// never truncates anything: Open fails instead.
// Stray temporary files are removed; index files without a .log are removed; any other
// file is refused with a *ForeignFileError.
func Open(dir string, opts Options) (*Log, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	l := &Log{dir: dir, opts: opts, fs: opts.FS}
	l.hdrs.New = func() any { return new([batch.HeaderSize]byte) }
	if err := l.fs.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("cannot create partition directory %s: %w", dir, err)
	}
	bases, err := l.listSegments()
	if err != nil {
		return nil, err
	}
	if err := l.readRecoveryPoint(len(bases) > 0); err != nil {
		return nil, err
	}
	l.rp.written = opts.Clock() // the first periodic record comes an interval after open
	if len(bases) == 0 {
		if err := l.create(); err != nil {
			return nil, err
		}
		return l, nil
	}
	l.mu.Lock()
	err = l.loadSegmentsLocked(bases)
	l.mu.Unlock()
	if err == nil {
		err = l.afterRecovery()
	}
	if err != nil {
		l.w.close()
		for _, s := range l.mu.segs {
			s.drop()
		}
		return nil, err
	}
	return l, nil
}

// readRecoveryPoint loads the recovery point into l.rp, or, when the directory holds
// segments (a new partition has neither), logs why there is none usable.
func (l *Log) readRecoveryPoint(hasSegments bool) error {
	rp, err := ReadRecoveryPoint(l.fs, l.dir)
	var ce *CorruptionError
	switch {
	case err == nil:
		l.rp.valid, l.rp.offset, l.rp.clean = true, rp.Offset, rp.Clean
	case errors.Is(err, ErrNoRecoveryPoint) && !hasSegments:
	case errors.Is(err, ErrNoRecoveryPoint) || errors.As(err, &ce):
		l.opts.Logger.Warn("no valid recovery point: recovery scans every segment; bad data in the last is cut as a torn tail, elsewhere it is damage",
			"dir", l.dir, "reason", err)
	default:
		return err // unreadable: never guess what is acknowledged
	}
	return nil
}

// create starts an empty log at InitialOffset. A recovery point that covers offsets of
// a directory without segments means the data is gone: that is refused, not papered
// over with a new segment.
func (l *Log) create() error {
	if l.rp.valid && l.rp.offset >= l.opts.InitialOffset {
		return fmt.Errorf("cannot open partition log %s: %w: %w", l.dir, ErrDamaged, &CorruptionError{
			File: dirJoin(l.dir, recoveryPointName), Pos: 0, Offset: l.opts.InitialOffset,
			Reason: fmt.Sprintf("the recovery point covers offsets up to %d but the directory holds no segment", l.rp.offset)})
	}
	seg := l.newSegment(l.opts.InitialOffset)
	seg.idx, seg.created = newIndex(), l.opts.Clock()
	l.mu.segs = []*segment{seg}
	l.start.Store(l.opts.InitialOffset)
	l.next.Store(l.opts.InitialOffset)
	l.written.Store(l.opts.InitialOffset)
	l.durable.Store(l.opts.InitialOffset - 1)
	if err := l.startSegment(seg); err != nil {
		seg.drop()
		return err
	}
	return nil
}

// listSegments returns the base offsets of the .log files in dir, ascending, after
// removing leftovers and refusing foreign files.
func (l *Log) listSegments() ([]int64, error) {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return nil, fmt.Errorf("cannot list partition directory %s: %w", l.dir, err)
	}
	logs := map[int64]bool{}
	var bases []int64
	var orphans []string
	for _, name := range names {
		kind, base := parseName(name)
		switch kind {
		case kindForeign:
			return nil, &ForeignFileError{Dir: l.dir, Name: name}
		case kindLeftover:
			orphans = append(orphans, name)
		case kindLog:
			logs[base] = true
			bases = append(bases, base) // names are sorted and zero-padded
		}
	}
	for _, name := range names {
		if kind, base := parseName(name); (kind == kindIndex || kind == kindTimeIndex) && !logs[base] {
			orphans = append(orphans, name)
		}
	}
	for _, name := range orphans {
		l.opts.Logger.Info("removing leftover file", "dir", l.dir, "file", name)
		if err := removeIfExists(l.fs, dirJoin(l.dir, name)); err != nil {
			return nil, err
		}
	}
	return bases, nil
}
