package local

import (
	"fmt"
	"sync/atomic"
	"time"

	"sluice/batch"
	"sluice/persist/vfs"
)

// segment is one .log file with its sparse indexes.
//
// Lifetime: the Log holds one reference from creation until the segment is deleted or the
// log closed; every Region holds one more. The file is closed when the count reaches zero,
// never earlier: a reader may be in the middle of a sendfile on its descriptor. Nothing
// relies on finalizers.
type segment struct {
	base int64
	path string
	refs atomic.Int32

	// Guarded by Log.mu. The writer changes them with the lock held; readers copy what
	// they need under the lock and then work on the copies.
	file    vfs.File // nil until first used (sealed segments open lazily)
	size    int64    // bytes of whole batches; valid once sized
	sized   bool     // sealed segments are sized lazily, so Open need not stat them all
	next    int64    // offset after the segment's last batch
	idx     *index   // nil until loaded (sealed segments load lazily)
	sealed  bool
	created time.Time // when the first batch was appended (rolling by age)
}

func newSegment(dir string, base int64) *segment {
	s := &segment{base: base, path: segmentName(dir, base, logSuffix), next: base, sized: true}
	s.refs.Store(1)
	return s
}

// acquire adds a reference; the caller must hold Log.mu (so the segment cannot be deleted
// concurrently) and later call release.
func (s *segment) acquire() { s.refs.Add(1) }

// release drops a reference and closes the file with the last one.
func (s *segment) release() {
	n := s.refs.Add(-1)
	if n < 0 {
		panic(fmt.Sprintf("BUG: segment %s released more often than acquired", s.path))
	}
	if n == 0 && s.file != nil {
		s.file.Close()
	}
}

// Release drops a reference (persist.Releaser: a Region holds one).
func (s *segment) Release() { s.release() }

// openLocked opens the segment's file if it is not open yet. Requires Log.mu.
func (s *segment) openLocked(fs vfs.FS) error {
	if s.file != nil {
		return nil
	}
	f, err := fs.Open(s.path)
	if err != nil {
		return fmt.Errorf("cannot open segment %s: %w", s.path, err)
	}
	s.file = f
	return nil
}

// loadIndexLocked makes s.idx available for a sealed segment: from its index files when
// they are present and consistent with the .log, otherwise by scanning the .log (and
// rewriting the index files). Requires Log.mu; runs once per segment per open.
func (s *segment) loadIndexLocked(l *Log) error {
	if s.idx != nil {
		return nil
	}
	if err := l.sizeLocked(s); err != nil {
		return err
	}
	if err := s.openLocked(l.fs); err != nil {
		return err
	}
	idx, reason := s.readIndexFiles(l.fs)
	if idx == nil {
		l.opts.Logger.Info("rebuilding segment index", "segment", s.path, "reason", reason)
		var err error
		if idx, err = s.rebuildIndex(l.opts.IndexInterval); err != nil {
			return err
		}
		if err := s.writeIndexFiles(l, idx); err != nil {
			return err
		}
	}
	s.idx = idx
	return nil
}

// readIndexFiles reads and checks both index files; on any problem it returns nil and why.
func (s *segment) readIndexFiles(fs vfs.FS) (*index, string) {
	ob, err := readAll(fs, segmentName(dirOf(s.path), s.base, indexSuffix))
	if err != nil {
		return nil, err.Error()
	}
	offs, err := decodeOffsets(ob, s.size)
	if err != nil {
		return nil, err.Error()
	}
	tb, err := readAll(fs, segmentName(dirOf(s.path), s.base, timeIndexSuffix))
	if err != nil {
		return nil, err.Error()
	}
	times, err := decodeTimes(tb, s.base, s.next)
	if err != nil {
		return nil, err.Error()
	}
	// The last entry must point at a real batch of the right offset: one header read
	// catches an index left over from a different .log.
	end := offs[len(offs)-1]
	var hdr [8]byte
	if _, err := s.file.ReadAt(hdr[:], end.pos); err != nil {
		return nil, fmt.Sprintf("cannot read batch at %d: %v", end.pos, err)
	}
	if got := batch.BaseOffset(hdr[:]); got != s.base+int64(end.rel) {
		return nil, fmt.Sprintf("index entry points at offset %d, want %d", got, s.base+int64(end.rel))
	}
	// The last time entry states the segment's maximum timestamp: the batch it names
	// must carry it.
	last := times[len(times)-1]
	hb := new([batch.HeaderSize]byte)
	pos, rel := floor(offs, uint32(last.offset-s.base))
	h, _, err := seekBatch(s, hb, pos, s.base+int64(rel), s.size, func(h batch.Header) bool {
		return h.BaseOffset >= last.offset
	})
	if err != nil || h.BaseOffset != last.offset || h.MaxTimestamp != last.ts {
		return nil, fmt.Sprintf("last time index entry (%d, %d) does not match its batch", last.ts, last.offset)
	}
	return &index{offs: offs, times: times, maxTs: last.ts, maxTsOffset: last.offset}, ""
}

// rebuildIndex scans the whole segment, verifying every batch, and returns its index.
func (s *segment) rebuildIndex(interval int64) (*index, error) {
	idx := newIndex()
	sc := newScanner(s.file, s.path, s.size, s.base)
	for sc.Next() {
		idx.add(s.base, sc.h.BaseOffset, sc.h.MaxTimestamp, sc.pos, int64(len(sc.batch)), interval)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	idx.seal()
	if sc.next != s.next {
		return nil, &CorruptionError{File: s.path, Pos: s.size, Offset: sc.next,
			Reason: fmt.Sprintf("segment ends at offset %d but the next segment starts at %d", sc.next, s.next)}
	}
	return idx, nil
}

// writeIndexFiles writes both index files of a sealed segment atomically (temporary file
// and rename), synced unless the log never syncs.
func (s *segment) writeIndexFiles(l *Log, idx *index) error {
	sync := l.opts.Sync != SyncNever
	dir := dirOf(s.path)
	buf := encodeOffsets(make([]byte, 0, len(idx.offs)*indexEntrySize+trailerSize), idx.offs)
	if err := vfs.WriteFile(l.fs, dir, segmentName(dir, s.base, indexSuffix), buf, sync); err != nil {
		return err
	}
	buf = encodeTimes(buf[:0], idx.times)
	return vfs.WriteFile(l.fs, dir, segmentName(dir, s.base, timeIndexSuffix), buf, sync)
}
