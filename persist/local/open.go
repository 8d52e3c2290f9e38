package local

import (
	"errors"
	"fmt"

	"sluice/batch"
)

// Open opens the log in dir, creating the directory and a first segment if needed, and
// recovers it.
//
// Recovery: every segment but the last is trusted (its files are only listed and sized;
// its index is read when it is first used). The last is scanned batch by batch, checking
// headers, CRCs and offset continuity, and truncated after the last valid batch; its index
// is rebuilt from the scan. Then it is fsynced and the durable checkpoint set to cover
// everything that survived. Stray temporary files are removed; index files without a
// .log are removed; any other file is refused with a *ForeignFileError.
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
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.lastSync = opts.Clock()
	if len(bases) == 0 {
		seg, err := l.createSegment(opts.InitialOffset)
		if err != nil {
			return nil, err
		}
		l.mu.segs = []*segment{seg}
		l.start.Store(opts.InitialOffset)
		l.next.Store(opts.InitialOffset)
		l.durable.Store(opts.InitialOffset - 1)
		return l, nil
	}
	if err := l.loadSegmentsLocked(bases); err != nil {
		for _, s := range l.mu.segs {
			s.release()
		}
		return nil, err
	}
	return l, nil
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

// loadSegmentsLocked builds the segment list: sealed segments from their sizes, the last
// one recovered by a scan.
func (l *Log) loadSegmentsLocked(bases []int64) error {
	for i, base := range bases {
		seg := newSegment(l.dir, base)
		l.mu.segs = append(l.mu.segs, seg)
		if i == len(bases)-1 {
			break
		}
		// Trusted and not touched: sized, opened and indexed when first used.
		seg.next, seg.sealed, seg.sized = bases[i+1], true, false
	}
	last := l.activeLocked()
	if err := l.recoverLocked(last); err != nil {
		return err
	}
	l.start.Store(bases[0])
	l.next.Store(last.next)
	if l.opts.Sync != SyncNever {
		if err := last.file.Sync(); err != nil {
			return fmt.Errorf("cannot fsync recovered segment %s: %w", last.path, err)
		}
	}
	l.durable.Store(last.next - 1)
	return nil
}

// recoverLocked scans the active segment, truncates it after its last valid batch, and
// rebuilds its index.
func (l *Log) recoverLocked(seg *segment) error {
	f, err := l.fs.OpenReadWrite(seg.path)
	if err != nil {
		return fmt.Errorf("cannot open segment %s: %w", seg.path, err)
	}
	seg.file = f
	size, err := f.Size()
	if err != nil {
		return fmt.Errorf("cannot stat segment %s: %w", seg.path, err)
	}
	idx := newIndex()
	sc := newScanner(f, seg.path, size, seg.base)
	for sc.Next() {
		idx.add(seg.base, sc.h.BaseOffset, sc.h.MaxTimestamp, sc.pos, int64(len(sc.batch)), l.opts.IndexInterval)
	}
	var corrupt *CorruptionError
	if err := sc.Err(); err != nil && !errors.As(err, &corrupt) {
		return err // an I/O error says nothing about the data: never truncate on one
	}
	if sc.pos < size {
		l.opts.Logger.Warn("truncating torn tail of the last segment", "segment", seg.path,
			"pos", sc.pos, "bytes", size-sc.pos, "reason", corrupt.Reason)
		if err := f.Truncate(sc.pos); err != nil {
			return fmt.Errorf("cannot truncate segment %s at %d: %w", seg.path, sc.pos, err)
		}
	}
	seg.size, seg.next, seg.idx, seg.created = sc.pos, sc.next, idx, l.opts.Clock()
	// The active segment's index lives in memory; stale files are rewritten when it seals.
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if err := removeIfExists(l.fs, segmentName(l.dir, seg.base, suffix)); err != nil {
			return err
		}
	}
	return nil
}
