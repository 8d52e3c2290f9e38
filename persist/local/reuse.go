package local

import (
	"errors"
	"fmt"
	"os"

	"sluice/persist/vfs"
)

// Segment file reuse.
//
// A partition under retention deletes a segment for about every segment it starts. On
// a filesystem mounted with discard, each unlink of a 64 MiB file costs the device
// 10-20 ms of TRIM, which competes with the persisters' writes; at 780 MB/s on four
// partitions (retention every 2 s, segments of 64 MiB) those unlinks, off the shards in
// the broker's reaper, took the end-to-end p99 from 3 ms to 11-19 ms, round after
// round, and without them it stayed at 3 ms (docs/bench/latency-notebook.md); a
// sustained produce under retention ran at 1.33 times the rate without them
// (BENCHMARKS.md). A new segment's preallocation then allocates the same space again.
//
// So retention keeps up to Options.ReuseSegments of the .log files it deletes, renamed
// to *.deleted as for Discard, and the persister starts its next segments in them: the
// file is zeroed in place (vfs.File.Zero: its blocks marked unwritten, not freed, so
// nothing is discarded and nothing is allocated), made durable, and renamed to the new
// segment's name. From then on it is exactly a freshly preallocated file: zeros past
// the data, which recovery already reads as the end of the active segment. A file still
// unused at the next retention pass goes to Discard, so a partition never holds more
// disk than it did just before a pass (the files kept are what that pass freed), and a
// partition that stopped being written gives them back one pass later.
//
// A file is kept only if nothing can read it any more (segment.reusable): retention
// drops the segment first, and a Region still holding its descriptor (a slow consumer's
// sendfile) makes it go to Discard as before, so no reader ever sees another segment's
// bytes under an old name. A crash leaves kept files as *.deleted, which Open removes.

// keptForReuse adds the files a retention pass kept (deleteSegments) to the spares, or
// discards them when the log closed meanwhile.
func (l *Log) keptForReuse(paths []string) {
	if len(paths) == 0 {
		return
	}
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		l.discardFiles(paths)
		return
	}
	l.mu.spares = append(l.mu.spares, paths...)
	l.mu.Unlock()
}

// reuseBudgetLocked is how many files the retention pass about to run may keep: none
// while the disk is full (the space retention frees may be what another partition, or
// this one's index files, are waiting for), or where the filesystem cannot zero in
// place. Requires l.mu.
func (l *Log) reuseBudgetLocked() int {
	if l.noReuse.Load() || l.mu.noSpace != nil {
		return 0
	}
	return max(l.opts.ReuseSegments, 0)
}

// discardFiles hands paths to Options.Discard, or removes them at once without it.
func (l *Log) discardFiles(paths []string) {
	if len(paths) == 0 {
		return
	}
	if l.opts.Discard != nil {
		l.opts.Discard(paths)
		return
	}
	for _, p := range paths {
		if err := removeIfExists(l.fs, p); err != nil {
			l.opts.Logger.Warn("cannot remove a deleted segment's file; the partition's next open removes it",
				"file", p, "err", err)
		}
	}
}

// reuseFile starts segment s in a kept file, if there is one: zeroed over its whole
// length (and at least the first preallocation step), fdatasync'd so that the zeros are
// durable before the new name is, and renamed to s's name. It returns the descriptor
// the persister writes through and how far the file is allocated, or a nil file when
// there is no spare or this one failed (it is discarded and the caller creates the file
// as without reuse). A filesystem without zeroing in place turns reuse off for the log.
// Persister only.
func (l *Log) reuseFile(s *segment) (f fileForWrite, ok bool) {
	l.mu.Lock()
	n := len(l.mu.spares)
	if n == 0 {
		l.mu.Unlock()
		return fileForWrite{}, false
	}
	spare := l.mu.spares[n-1]
	l.mu.spares = l.mu.spares[:n-1]
	l.mu.Unlock()
	fw, err := l.prepareSpare(spare, s.path)
	if err != nil {
		if errors.Is(err, errors.ErrUnsupported) && !l.noReuse.Swap(true) {
			l.opts.Logger.Info("the filesystem cannot zero a file in place: deleted segments' files are removed, not reused",
				"dir", l.dir, "err", err)
			l.mu.Lock()
			rest := l.mu.spares
			l.mu.spares = nil
			l.mu.Unlock()
			l.discardFiles(rest)
		} else {
			l.opts.Logger.Warn("cannot reuse a deleted segment's file; creating the segment's file instead",
				"file", spare, "segment", s.path, "err", err)
		}
		l.discardFiles([]string{spare})
		return fileForWrite{}, false
	}
	return fw, true
}

// fileForWrite is a segment file opened for the persister: its descriptor, whether it
// is O_DIRECT, and how far it is allocated.
type fileForWrite struct {
	f         vfs.File
	direct    bool
	allocated int64
}

// prepareSpare zeroes the kept file spare in place, syncs it, renames it to path and
// opens it there (so that errors name the segment's file).
//
// The zeroed range ends on a page boundary past the file's end: ZERO_RANGE removes the
// whole pages it covers from the page cache, and zeroes the part of a page it covers
// partly in place, and a page of the old segment that sendfile handed to a socket may
// still be in its send queue, unacknowledged (TCP sends those pages, it does not copy
// them): removed, the socket's reference keeps the old bytes; zeroed in place, it would
// send zeros.
func (l *Log) prepareSpare(spare, path string) (fileForWrite, error) {
	f, _, err := l.fs.OpenDirect(spare, false)
	if err != nil {
		return fileForWrite{}, fmt.Errorf("cannot start segment %s in %s: %w", path, spare, err)
	}
	size, err := f.Size()
	page := int64(max(os.Getpagesize(), vfs.DirectAlign))
	allocated := (max(size, l.allocTarget(0)) + page - 1) / page * page
	if err == nil {
		if err = f.Zero(0, allocated); err == nil {
			err = f.Datasync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = l.fs.Rename(spare, path)
	}
	if err != nil {
		return fileForWrite{}, fmt.Errorf("cannot start segment %s in %s: %w", path, spare, err)
	}
	f, direct, err := l.fs.OpenDirect(path, false)
	if err != nil {
		// The zeroed file is under the segment's name now: the caller creates it afresh.
		return fileForWrite{}, fmt.Errorf("cannot open segment %s, reused: %w", path, err)
	}
	return fileForWrite{f: f, direct: direct, allocated: allocated}, nil
}
