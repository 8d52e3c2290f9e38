package local

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"sluice/batch"
	"sluice/persist/vfs"
)

// segment is one .log file with its sparse indexes.
//
// Its read descriptor lives in a handle (see FilePool), opened read-only when a read
// needs it and evicted by the pool whenever nobody uses it; the active segment's too.
// (The persister writes through a descriptor of its own: Log.w.) Users take a reference
// on the handle (use), so the descriptor outlives the segment's place in the log:
// retention may delete a file while a Region still sends from it.
//
// A segment is placed, written and sealed in that order: Place records batches in its
// index and moves placed; Persist writes them (creating the file first) and moves size;
// once the log has moved past the segment and everything placed is written, Persist
// cuts the file to its length, writes the index files and seals it. Readers see size.
type segment struct {
	base int64
	path string
	fs   vfs.FS
	pool *FilePool

	h    atomic.Pointer[handle] // the open descriptor; nil while closed (evicted or dropped)
	dead atomic.Bool            // dropped from the log: never reopened
	// files counts the descriptors of the file that are open or being opened by use:
	// handles not yet closed, including ones the segment no longer points to but a
	// Region still holds. A dropped segment's file is reused for new data only while it
	// is 0 (reusable), so no reader ever reads another segment's bytes through it.
	files atomic.Int32
	// sharesFile marks a segment Truncate made for the file of another segment object
	// (truncatedCopyLocked): that object's readers count in its own files, not in this
	// one's, so this file is never reused.
	sharesFile bool

	// Guarded by Log.mu. The owner and the persister change them with the lock held;
	// readers copy what they need under the lock and then work on the copies.
	size   int64 // bytes of whole batches written to the file; valid once sized
	sized  bool  // sealed segments are sized lazily, so Open need not stat them all
	next   int64 // offset after the segment's last written batch
	idx    *index
	sealed bool
	// placed and placedNext are size and next for the batches placed, written or not
	// (unsealed segments only; sealed ones are wholly written).
	placed, placedNext int64
	created            time.Time // when the first batch was placed (rolling by age)
	// sealedAt is when the segment was sealed, by the log's clock (Unix ms): by this
	// process, or, for one found sealed at open, its file's last write (read on first
	// need); 0 until known. Retention by age waits for it (retention.go).
	sealedAt int64
	// verified marks the index intervals whose batch headers have been checked since the
	// segment was loaded from disk (see verify.go); nil when every header is known good
	// (written or scanned by this process). Set before idx is published, then fixed.
	verified *bitmap
	// needSync: the file may hold data no fsync has covered, so no recovery point may
	// cover it until one does (cut by Truncate under SyncNever, or loaded above the
	// recovery point); sealing clears it (finishSegment fdatasyncs the file).
	needSync bool
	// bad is the corruption that the scan rebuilding a trusted segment's index stopped
	// at, or nil. The segment is then served up to it (see viewLocked) and reads at or
	// past it return it, so the segment is scanned once, not on every read.
	bad *CorruptionError
}

func newSegment(dir string, fs vfs.FS, pool *FilePool, base int64) *segment {
	return &segment{base: base, path: segmentName(dir, base, logSuffix), fs: fs, pool: pool, next: base, placedNext: base, sized: true}
}

// newSegment returns a segment of l at base, not yet installed or published.
func (l *Log) newSegment(base int64) *segment { return newSegment(l.dir, l.fs, l.opts.Files, base) }

// install makes f the segment's descriptor, held by the segment alone and outside any
// pool (Inspect's segments, which are read once and dropped).
func (s *segment) install(f vfs.File) {
	s.files.Add(1)
	if !s.h.CompareAndSwap(nil, newHandle(f, s, 1)) {
		panic(fmt.Sprintf("BUG: segment %s installed twice", s.path))
	}
}

// errSegmentGone is returned by use for a segment the log dropped.
var errSegmentGone = errors.New("segment dropped from the log")

// use returns the segment's handle with a reference for the caller to release, opening
// the file read-only when it is closed. Safe from any goroutine, with or without Log.mu.
func (s *segment) use() (*handle, error) {
	for {
		if h := s.h.Load(); h != nil {
			if h.tryAcquire() {
				return h, nil
			}
			continue // being evicted: the pointer is about to be cleared
		}
		// Counted before dead is read, and reusable sets dead before it reads the count:
		// with both atomic (sequentially consistent), either this open sees the segment
		// dead or reusable sees the open.
		s.files.Add(1)
		if s.dead.Load() {
			s.files.Add(-1)
			return nil, errSegmentGone
		}
		f, err := s.fs.Open(s.path)
		if err != nil {
			s.files.Add(-1)
			if s.dead.Load() {
				return nil, errSegmentGone
			}
			return nil, fmt.Errorf("cannot open segment %s: %w", s.path, err)
		}
		// Reads of a segment are sequential (a consumer catching up, a scan): a larger
		// readahead window fills the page cache ahead of sendfile.
		vfs.AdviseSequential(f)
		h := newHandle(f, s, 2) // the segment's reference and the caller's
		h.used.Store(true)
		s.pool.opened(h)
		if !s.h.CompareAndSwap(nil, h) { // another reader opened it first
			h.refs.Store(1)
			h.release()
			continue
		}
		if s.dead.Load() { // dropped while we opened it: give the segment's reference back
			if s.h.CompareAndSwap(h, nil) {
				h.release()
			}
			return h, nil
		}
		s.pool.insert(h)
		return h, nil
	}
}

// drop detaches the segment from the log (deleted, truncated away, or the log closed):
// it is never reopened, and its descriptor closes once no Region uses it.
func (s *segment) drop() {
	s.dead.Store(true)
	if h := s.h.Swap(nil); h != nil {
		if p := h.pool.Load(); p != nil {
			p.remove(h)
		}
		h.release()
	}
}

// reusable reports whether the file of a dropped segment is open nowhere and cannot be
// opened again by use, so that it may be given other data (reuse.go). Call after drop.
func (s *segment) reusable() bool {
	return !s.sharesFile && s.dead.Load() && s.files.Load() == 0
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
	h, err := s.use()
	if err != nil {
		return err
	}
	defer h.release()
	idx, reason := s.readIndexFiles(h)
	if idx == nil {
		l.opts.Logger.Info("rebuilding segment index", "segment", s.path, "reason", reason)
		var bad *CorruptionError
		if idx, bad, err = s.rebuildIndex(h, l.opts.IndexInterval); err != nil {
			return err
		}
		if bad != nil { // served up to the damage; the index files stay as they are
			l.opts.Logger.Error("corrupt data in a sealed segment: serving the batches before it", "segment", s.path, "err", bad)
			s.bad = bad
		} else if err := s.writeIndexFiles(l, idx); err != nil {
			return err
		}
	} else {
		s.verified = newBitmap(len(idx.offs)) // trusted, not checked: verified on first read
	}
	s.idx = idx
	return nil
}

// readIndexFiles reads and checks both index files; on any problem it returns nil and why.
func (s *segment) readIndexFiles(h *handle) (*index, string) {
	idx, _, reason := s.readIndexPair(h)
	return idx, reason
}

// readIndexPair is readIndexFiles, also naming the suffix of the file at fault
// (indexSuffix or timeIndexSuffix) when it fails.
func (s *segment) readIndexPair(h *handle) (*index, string, string) {
	ob, err := readAll(s.fs, segmentName(dirOf(s.path), s.base, indexSuffix))
	if err != nil {
		return nil, indexSuffix, err.Error()
	}
	offs, err := decodeOffsets(ob, s.size)
	if err != nil {
		return nil, indexSuffix, err.Error()
	}
	tb, err := readAll(s.fs, segmentName(dirOf(s.path), s.base, timeIndexSuffix))
	if err != nil {
		return nil, timeIndexSuffix, err.Error()
	}
	times, err := decodeTimes(tb, s.base, s.next)
	if err != nil {
		return nil, timeIndexSuffix, err.Error()
	}
	// The last entry must point at a real batch of the right offset: one header read
	// catches an index left over from a different .log.
	end := offs[len(offs)-1]
	hb := new([batch.HeaderSize]byte)
	if _, err := readHeader(h, hb, end.pos, s.base+int64(end.rel), s.size); err != nil {
		return nil, indexSuffix, fmt.Sprintf("last index entry: %v", err)
	}
	// The last time entry states the segment's maximum timestamp: the batch it names
	// must carry it.
	last := times[len(times)-1]
	pos, rel := floor(offs, uint32(last.offset-s.base))
	hd, _, err := seekBatch(h, hb, pos, s.base+int64(rel), s.size, func(h batch.Header) bool {
		return h.BaseOffset >= last.offset
	})
	if err != nil || hd.BaseOffset != last.offset || hd.MaxTimestamp != last.ts {
		return nil, timeIndexSuffix, fmt.Sprintf("last time index entry (%d, %d) does not match its batch", last.ts, last.offset)
	}
	return &index{offs: offs, times: times, maxTs: last.ts, maxTsOffset: last.offset}, "", ""
}

// rebuildIndex scans the whole segment, verifying every batch, and returns its index:
// of every batch, or of those before bad, the corruption that stopped the scan (or the
// segment ending short of the next one). err is for I/O.
func (s *segment) rebuildIndex(h *handle, interval int64) (idx *index, bad *CorruptionError, err error) {
	idx = newIndex()
	sc := newScanner(h.f, s.path, s.size, s.base)
	for sc.Next() {
		idx.add(s.base, sc.h.BaseOffset, sc.h.MaxTimestamp, sc.pos, int64(len(sc.batch)), interval)
	}
	if err := sc.Err(); err != nil && !errors.As(err, &bad) {
		return nil, nil, err
	}
	idx.seal()
	if bad == nil && sc.next != s.next {
		bad = &CorruptionError{File: s.path, Pos: sc.pos, Offset: sc.next,
			Reason: fmt.Sprintf("segment ends at offset %d but the next segment starts at %d", sc.next, s.next)}
	}
	if bad != nil && len(idx.offs) == 0 { // nothing valid: an index entry for the empty prefix
		idx.offs = []offsetEntry{{rel: 0, pos: 0}}
	}
	return idx, bad, nil
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
