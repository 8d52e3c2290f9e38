package local

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"sluice/persist"
	"sluice/persist/vfs"
	"sluice/persist/vfs/errorfs"
)

// inode returns the inode number of path.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// inodes returns the inode numbers of the files dir holds whose names end in suffix.
func inodes(t *testing.T, dir, suffix string) map[uint64]string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "*"+suffix))
	m := map[uint64]string{}
	for _, p := range paths {
		m[inode(t, p)] = p
	}
	return m
}

// keptFiles returns the inodes of the *.log.deleted files in dir that were not handed to
// Discard (which here only records them): the files kept for reuse.
func keptFiles(t *testing.T, dir string, handed []string) map[uint64]string {
	t.Helper()
	m := inodes(t, dir, logSuffix+deletedSuffix)
	for _, p := range handed {
		if strings.HasSuffix(p, logSuffix+deletedSuffix) {
			delete(m, inode(t, p))
		}
	}
	return m
}

// zeroCapableDir returns a temporary directory, skipping the test where its filesystem
// cannot zero a file in place (TestReuseOnTmpfs and TestReuseWithoutZeroInPlace cover
// that case).
func zeroCapableDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	probe := filepath.Join(dir, "probe")
	f, err := vfs.Default().Create(probe)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Zero(0, vfs.DirectAlign)
	f.Close()
	os.Remove(probe)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		t.Skipf("the filesystem of %s cannot zero a file in place: %v", dir, err)
	case err != nil:
		t.Fatal(err)
	}
	return dir
}

// reuseFixture is a log of 4 KiB segments keeping 20 KiB, filled with 1000 batches,
// whose Discard only records the paths it is handed (a reaper that has not run yet).
type reuseFixture struct {
	l      *Log
	dir    string
	opts   Options
	handed []string
}

// newReuseFixture opens the fixture's log with ReuseSegments keep, on fs (nil: the
// operating system's).
func newReuseFixture(t *testing.T, keep int, fs vfs.FS) *reuseFixture {
	t.Helper()
	x := &reuseFixture{dir: zeroCapableDir(t)}
	x.opts = Options{SegmentBytes: 4 << 10, RetentionBytes: 20 << 10, Sync: SyncNever, ReuseSegments: keep, FS: fs,
		Discard: func(paths []string) { x.handed = append(x.handed, paths...) }}
	x.l = openLog(t, x.dir, x.opts)
	appendN(t, x.l, 1000)
	return x
}

// regionBytes reads the bytes of r from its file.
func regionBytes(t *testing.T, r persist.Region) []byte {
	t.Helper()
	b := make([]byte, r.Len)
	if _, err := r.File.ReadAt(b, r.Pos); err != nil {
		t.Fatal(err)
	}
	return b
}

// appendUntilReused appends batches until the log has started want segments in kept
// files (at most 5000 batches).
func appendUntilReused(t *testing.T, l *Log, want int64) {
	t.Helper()
	for range 5000 {
		if stats(t, l).Reused >= want {
			return
		}
		appendN(t, l, 1)
	}
	t.Fatalf("reused %d files, want %d", stats(t, l).Reused, want)
}

// handedLogs counts the .log files among paths handed to Discard.
func handedLogs(paths []string) int {
	n := 0
	for _, p := range paths {
		if strings.HasSuffix(p, logSuffix+deletedSuffix) {
			n++
		}
	}
	return n
}

// TestRetentionReusesSegmentFiles: retention keeps ReuseSegments of the .log files it
// deletes (the rest go to Discard), and the next segments are written into them: the
// same inodes come back as live segments, zeroed past their data, and the log reads
// back whole, before and after a reopen.
func TestRetentionReusesSegmentFiles(t *testing.T) {
	x := newReuseFixture(t, 4, nil)
	l, dir, opts := x.l, x.dir, x.opts
	before := stats(t, l)
	after := retainDurable(t, l, before)
	handed := x.handed
	deleted := before.Segments - after.Segments
	if deleted <= opts.ReuseSegments {
		t.Fatalf("retention deleted %d segments; the test needs more than %d", deleted, opts.ReuseSegments)
	}
	kept := keptFiles(t, dir, handed)
	if after.Spares != opts.ReuseSegments || len(kept) != opts.ReuseSegments {
		t.Fatalf("kept %d files (%d on disk), want %d", after.Spares, len(kept), opts.ReuseSegments)
	}
	if n := handedLogs(handed); n != deleted-opts.ReuseSegments {
		t.Fatalf("handed %d .log files to Discard, want %d", n, deleted-opts.ReuseSegments)
	}
	for _, p := range handed {
		if _, ok := kept[inode(t, p)]; ok {
			t.Fatalf("%s is both kept and handed to Discard", p)
		}
	}
	appendUntilReused(t, l, int64(opts.ReuseSegments))
	live := inodes(t, dir, logSuffix)
	for ino, p := range kept {
		if _, ok := live[ino]; !ok {
			t.Fatalf("kept file %s (inode %d) is not a live segment", p, ino)
		}
	}
	if st := stats(t, l); st.Spares != 0 {
		t.Fatalf("%d files still kept after %d reused", st.Spares, st.Reused)
	}
	// The active segment is the last file reused: zeros past its data.
	l.mu.Lock()
	active := l.mu.segs[len(l.mu.segs)-1]
	path, size := active.path, active.size
	l.mu.Unlock()
	if _, ok := kept[inode(t, path)]; !ok {
		t.Fatalf("the active segment %s is not in a kept file", path)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(raw)) <= size {
		t.Fatalf("active segment file of %d bytes holds %d bytes of data: not preallocated", len(raw), size)
	}
	if i := bytes.IndexFunc(raw[size:], func(r rune) bool { return r != 0 }); i >= 0 {
		t.Fatalf("the reused file holds old bytes at %d, past its data at %d", size+int64(i), size)
	}
	checkContents(t, l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, opts)
	if got := stats(t, l); got.Next != got.Written || got.Start != after.Start {
		t.Fatalf("reopened: %+v", got)
	}
	checkContents(t, l)
}

// TestReuseSkipsFilesReadersHold: a deleted segment whose file a Region still holds (a
// consumer's sendfile in flight) is never reused, even with room to keep it: the
// region keeps reading the segment's own bytes while new segments are written.
func TestReuseSkipsFilesReadersHold(t *testing.T) {
	x := newReuseFixture(t, 1000, nil)
	l := x.l
	first := segmentName(x.dir, l.Start(), logSuffix)
	r, err := l.ReadRegion(l.Start(), 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	want := regionBytes(t, r)
	before := stats(t, l)
	after := retainDurable(t, l, before)
	if !slices.Contains(x.handed, first+deletedSuffix) {
		t.Fatalf("the held segment %s was not handed to Discard (%d files handed)", first, len(x.handed))
	}
	if deleted := before.Segments - after.Segments; after.Spares != deleted-1 {
		t.Fatalf("kept %d of %d deleted files, want all but the held one", after.Spares, deleted)
	}
	appendUntilReused(t, l, int64(after.Spares))
	got := regionBytes(t, r)
	if !bytes.Equal(got, want) {
		t.Fatal("a held region of a deleted segment reads other bytes after reuse")
	}
	checkBatch(t, got, r.Offset)
	checkContents(t, l)
}

// TestReuseUnusedFilesGoAtNextPass: files a pass kept and no new segment took go to
// Discard at the next pass, and Close hands over what is kept: a partition that stops
// being written gives its disk back.
func TestReuseUnusedFilesGoAtNextPass(t *testing.T) {
	x := newReuseFixture(t, 3, nil)
	l := x.l
	retainDurable(t, l, stats(t, l))
	kept := keptFiles(t, x.dir, x.handed)
	x.handed = nil
	if n, err := l.ApplyRetention(l.Durable()); err != nil || n != 0 {
		t.Fatalf("second pass deleted %d (%v)", n, err)
	}
	if st := stats(t, l); st.Spares != 0 || handedLogs(x.handed) != len(kept) {
		t.Fatalf("after a pass with nothing reused: %d kept, %d handed, want 0 and %d", st.Spares, handedLogs(x.handed), len(kept))
	}
	for _, p := range x.handed {
		if strings.HasSuffix(p, logSuffix+deletedSuffix) {
			if _, ok := kept[inode(t, p)]; !ok {
				t.Fatalf("handed %s, which was not kept", p)
			}
		}
	}
	// Kept again, then Close hands them over.
	appendN(t, l, 300)
	retainDurable(t, l, stats(t, l))
	n := stats(t, l).Spares
	x.handed = nil
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n == 0 || handedLogs(x.handed) != n {
		t.Fatalf("Close handed %d of %d kept files", handedLogs(x.handed), n)
	}
}

// TestReuseWithoutZeroInPlace: where the filesystem cannot zero a file in place (an
// injected ErrUnsupported: tmpfs, some network filesystems), the first attempt turns
// reuse off: that file and the others kept go to Discard, new segments are created as
// without reuse, and later passes keep nothing. Another failure (an I/O error) costs
// only the file it hit.
func TestReuseWithoutZeroInPlace(t *testing.T) {
	for _, tc := range []struct {
		name        string
		err         error
		keptLater   bool
		wantReused0 bool
	}{
		{"unsupported", fmt.Errorf("no zero range: %w", errors.ErrUnsupported), false, true},
		{"io error once", syscall.EIO, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule := &errorfs.Rule{Op: errorfs.OpAllocate, Suffix: deletedSuffix, Err: tc.err}
			if !tc.wantReused0 {
				rule.Times = 1
			}
			x := newReuseFixture(t, 3, errorfs.Wrap(vfs.Default(), rule))
			l := x.l
			retainDurable(t, l, stats(t, l))
			x.handed = nil
			appendN(t, l, 300)
			st := stats(t, l)
			if tc.wantReused0 {
				if st.Reused != 0 || st.Spares != 0 || handedLogs(x.handed) != 3 {
					t.Fatalf("reused %d, %d still kept, %d handed to Discard; want 0, 0, 3", st.Reused, st.Spares, handedLogs(x.handed))
				}
			} else if st.Reused != 2 || handedLogs(x.handed) != 1 {
				t.Fatalf("reused %d, handed %d; want 2 and the one that failed", st.Reused, handedLogs(x.handed))
			}
			checkContents(t, l)
			retainDurable(t, l, stats(t, l))
			if got := stats(t, l).Spares > 0; got != tc.keptLater {
				t.Fatalf("the next pass kept files: %v, want %v", got, tc.keptLater)
			}
		})
	}
}

// TestReusedFileReadsZerosPastItsData: a segment started in a kept file reads as zeros
// past its data over the whole old file, not only over the block its first write
// padded: recovery takes zeros where a header should be for the end of the active
// segment, and old batches there would be read as a torn tail or worse. (The other
// tests' segments are one block long, which that first write covers whole.)
func TestReusedFileReadsZerosPastItsData(t *testing.T) {
	dir := zeroCapableDir(t)
	opts := Options{SegmentBytes: 256 << 10, RetentionBytes: 512 << 10, Sync: SyncNever, ReuseSegments: 2}
	l := openLog(t, dir, opts)
	src := NewMemSource()
	for stats(t, l).Segments < 6 {
		placeN(t, l, src, 200)
		persistAll(t, l, src)
	}
	retainDurable(t, l, stats(t, l))
	appendUntilReused(t, l, 1)
	l.mu.Lock()
	active := l.mu.segs[len(l.mu.segs)-1]
	path, size := active.path, active.size
	l.mu.Unlock()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(raw)) < opts.SegmentBytes-int64(vfs.DirectAlign) {
		t.Fatalf("the reused file has %d bytes, want about a whole old segment (%d)", len(raw), opts.SegmentBytes)
	}
	if i := bytes.IndexFunc(raw[size:], func(r rune) bool { return r != 0 }); i >= 0 {
		t.Fatalf("the reused file holds old bytes at %d, past its data at %d", size+int64(i), size)
	}
	checkContents(t, l)
}

// TestReuseAfterTruncateKeepsHeldRegion: Truncate makes a new segment object for the
// file it cuts, and a Region taken before the cut counts in the old object's
// descriptors, not the new one's: that file is never reused, so the region keeps
// reading its own bytes after retention deleted the segment and new ones took the other
// files (found by review: the file was zeroed and rewritten under the region).
func TestReuseAfterTruncateKeepsHeldRegion(t *testing.T) {
	x := newReuseFixture(t, 1000, nil)
	l := x.l
	l.mu.Lock()
	s := l.mu.segs[len(l.mu.segs)-2]
	base, next := s.base, s.next
	l.mu.Unlock()
	last := base + int64(countAt(base)) - 1
	if last+1 >= next {
		t.Fatalf("segment %d holds one batch; the test cuts after its first", base)
	}
	r, err := l.ReadRegion(base, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	want := regionBytes(t, r)
	if err := l.Truncate(last); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 400)
	after := retainDurable(t, l, stats(t, l))
	if after.Start <= base {
		t.Fatalf("retention kept the cut segment (start %d, segment %d)", after.Start, base)
	}
	appendUntilReused(t, l, int64(after.Spares))
	if got := regionBytes(t, r); !bytes.Equal(got, want) {
		t.Fatal("a region held across Truncate reads other bytes after its file was reused")
	}
	checkContents(t, l)
}

// TestReuseOnTmpfs: on a real filesystem without zeroing in place (tmpfs, which also
// refuses O_DIRECT), the first reuse turns reuse off and the log goes on as without
// it: segments created, the kept files handed over, the next passes keep none, and the
// log reads back whole. TestReuseWithoutZeroInPlace injects the same refusal anywhere.
func TestReuseOnTmpfs(t *testing.T) {
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err != nil || st.Type != 0x01021994 { // TMPFS_MAGIC
		t.Skip("needs /dev/shm on tmpfs, which this machine does not have")
	}
	dir, err := os.MkdirTemp("/dev/shm", "sluice-reuse-")
	if err != nil {
		t.Skipf("cannot use /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var handed []string
	opts := Options{SegmentBytes: 4 << 10, RetentionBytes: 20 << 10, Sync: SyncNever, ReuseSegments: 3,
		Discard: func(paths []string) { handed = append(handed, paths...) }}
	l := openLog(t, dir, opts)
	appendN(t, l, 1000)
	if after := retainDurable(t, l, stats(t, l)); after.Spares != 3 {
		t.Fatalf("kept %d files, want 3 (reuse is tried once)", after.Spares)
	}
	handed = nil
	appendN(t, l, 300)
	if st := stats(t, l); st.Reused != 0 || st.Spares != 0 || handedLogs(handed) != 3 {
		t.Fatalf("on tmpfs: reused %d, %d still kept, %d handed; want 0, 0, 3", st.Reused, st.Spares, handedLogs(handed))
	}
	retainDurable(t, l, stats(t, l))
	if n := stats(t, l).Spares; n != 0 {
		t.Fatalf("a pass after reuse turned off kept %d files", n)
	}
	checkContents(t, l)
}

// TestReuseOfFilesRemovedByHand: kept files an operator removed to free a full disk at
// once (docs/operations.md) are skipped, not an error: the segments are created as
// without reuse and the log reads back whole.
func TestReuseOfFilesRemovedByHand(t *testing.T) {
	x := newReuseFixture(t, 3, nil)
	l := x.l
	retainDurable(t, l, stats(t, l))
	for _, p := range keptFiles(t, x.dir, x.handed) {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	appendN(t, l, 300)
	if st := stats(t, l); st.Reused != 0 || st.Spares != 0 {
		t.Fatalf("reused %d removed files, %d still kept", st.Reused, st.Spares)
	}
	checkContents(t, l)
	retainDurable(t, l, stats(t, l))
	if n := stats(t, l).Spares; n == 0 {
		t.Fatal("reuse stopped after files were removed by hand")
	}
	appendUntilReused(t, l, 1)
	checkContents(t, l)
}
