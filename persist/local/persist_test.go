package local

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"sluice/batch"
	"sluice/persist/vfs"
	"sluice/persist/vfs/errorfs"
)

// alignFS wraps the files OpenDirect returns so that every WriteVec is checked for the
// alignment O_DIRECT needs, whether or not the file took O_DIRECT: a buffered
// fall-back must be given the same aligned writes.
type alignFS struct{ vfs.FS }

type alignFile struct{ vfs.File }

func (fs alignFS) OpenDirect(name string, create bool) (vfs.File, bool, error) {
	f, direct, err := fs.FS.OpenDirect(name, create)
	if err != nil {
		return nil, false, err
	}
	return alignFile{f}, direct, nil
}

func (f alignFile) WriteVec(bufs [][]byte, off int64) (int, error) {
	if off%Block != 0 {
		return 0, fmt.Errorf("write at %d: not aligned", off)
	}
	for i, b := range bufs {
		if len(b)%Block != 0 || !aligned(b) {
			return 0, fmt.Errorf("write at %d: buffer %d of %d bytes at %p is not aligned", off, i, len(b), &b[0])
		}
	}
	return f.File.WriteVec(bufs, off)
}

// unalignedSource gives the bytes of a MemSource in pieces of random lengths at
// addresses that are never aligned: a source that breaks the alignment promise.
type unalignedSource struct {
	inner *MemSource
	rng   *rand.Rand
}

func (s *unalignedSource) Settled(f func()) { s.inner.Settled(f) }

func (s *unalignedSource) Bytes(seg, from, to int64, dst [][]byte) ([][]byte, func(), error) {
	pieces, release, err := s.inner.Bytes(seg, from, to, nil)
	if err != nil {
		return dst, nil, err
	}
	var all []byte
	for _, p := range pieces {
		all = append(all, p...)
	}
	for len(all) > 0 {
		n := min(len(all), 1+s.rng.IntN(3*Block))
		buf := make([]byte, n+Block+1)
		skip := 1 + (Block-int(uintptr(unsafe.Pointer(&buf[0])))%Block)%Block // one past an aligned address
		p := buf[skip : skip+n]
		copy(p, all[:n])
		dst, all = append(dst, p), all[n:]
	}
	return dst, release, nil
}

// TestDirectIOOnDisk: on the test's disk (ext4 here), segment files are written with
// O_DIRECT: the write descriptor has the flag, and bytes persisted (and not read) are
// not in the page cache.
func TestDirectIOOnDisk(t *testing.T) {
	dir := t.TempDir()
	if !directCapable(t, dir) {
		t.Skip("the filesystem of the test's temporary directory refuses O_DIRECT")
	}
	l := openLog(t, dir, Options{SegmentBytes: 4 << 20, FS: alignFS{vfs.Default()}})
	if !l.DirectIO() {
		t.Fatal("DirectIO() is false on a filesystem that takes O_DIRECT")
	}
	flags, err := unix.FcntlInt(l.w.bw.f.Fd(), unix.F_GETFL, 0)
	if err != nil || flags&unix.O_DIRECT == 0 {
		t.Fatalf("the write descriptor's flags %#o lack O_DIRECT (%v)", flags, err)
	}
	src := NewMemSource()
	for l.Pending() < 2<<20 {
		placeN(t, l, src, 50)
	}
	persistAll(t, l, src)
	if n := residentPages(t, lastSegment(t, dir), l.Written()); n > 2 {
		t.Fatalf("%d pages of the segment written with O_DIRECT are in the page cache", n)
	}
	checkContents(t, l)
}

// directCapable reports whether dir's filesystem takes O_DIRECT.
func directCapable(t *testing.T, dir string) bool {
	f, direct, err := vfs.Default().OpenDirect(filepath.Join(dir, "probe"), true)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	os.Remove(filepath.Join(dir, "probe"))
	return direct
}

// residentPages returns how many pages of the first n bytes of path are in the page
// cache (mincore of a mapping of them).
func residentPages(t *testing.T, path string, n int64) int {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, int(n), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	vec := make([]byte, (n+int64(os.Getpagesize())-1)/int64(os.Getpagesize()))
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	resident := 0
	for _, v := range vec {
		resident += int(v & 1)
	}
	return resident
}

// TestBufferedFallBack: where O_DIRECT is refused (injected through errorfs on the
// test's disk, and for real on ramfs), the log writes the same aligned blocks through
// the page cache, says so once in its log however many files it creates, reports
// DirectIO false, and works the same: round trip, rolls, reopen.
func TestBufferedFallBack(t *testing.T) {
	refused := errorfs.Wrap(vfs.Default(), refuseDirect{})
	t.Run("refused", func(t *testing.T) { testFallBack(t, t.TempDir(), alignFS{refused}, false) })
	t.Run("ramfs", func(t *testing.T) { testFallBack(t, mountScratch(t, "ramfs"), alignFS{vfs.Default()}, false) })
	// tmpfs refuses O_DIRECT before Linux 6.6 and takes it since (as buffered I/O).
	t.Run("tmpfs", func(t *testing.T) {
		dir := mountScratch(t, "tmpfs")
		testFallBack(t, dir, alignFS{vfs.Default()}, directCapable(t, dir))
	})
}

func testFallBack(t *testing.T, dir string, fs vfs.FS, direct bool) {
	rec := &logRecorder{}
	opts := Options{SegmentBytes: 16 << 10, FS: fs, Logger: rec.logger()}
	l := openLog(t, dir, opts)
	if l.DirectIO() != direct {
		t.Fatalf("DirectIO() = %v, want %v", l.DirectIO(), direct)
	}
	flags, err := unix.FcntlInt(l.w.bw.f.Fd(), unix.F_GETFL, 0)
	if err != nil || (flags&unix.O_DIRECT != 0) != direct {
		t.Fatalf("the write descriptor's flags %#o (%v), want O_DIRECT %v", flags, err, direct)
	}
	src := NewMemSource()
	for range 40 {
		placeN(t, l, src, 17)
		persistAll(t, l, src)
	}
	if n := stats(t, l).Segments; n < 5 {
		t.Fatalf("%d segments: the test did not roll", n)
	}
	want := 1
	if direct {
		want = 0
	}
	if n := rec.count(slog.LevelWarn, "refuses O_DIRECT"); n != want {
		t.Fatalf("the fall-back was logged %d times, want %d", n, want)
	}
	checkContents(t, l)
	next := l.Next()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, opts)
	if l.Next() != next || l.Damage() != nil || l.DirectIO() != direct {
		t.Fatalf("reopened at %d (damage %v, direct %v), want %d", l.Next(), l.Damage(), l.DirectIO(), next)
	}
	checkContents(t, l)
	appendN(t, l, 30)
	checkContents(t, l)
}

// mountScratch mounts a fresh filesystem of type fstype (tmpfs, ramfs) on a temporary
// directory for the test, or skips the test where mounting is refused (it needs root).
func mountScratch(t *testing.T, fstype string) string {
	dir := t.TempDir()
	if err := unix.Mount(fstype, dir, fstype, 0, "size=64m"); err != nil {
		t.Skipf("cannot mount a %s on %s (%v): this test needs root", fstype, dir, err)
	}
	t.Cleanup(func() { unix.Unmount(dir, 0) }) // before TempDir's removal: cleanups run last first
	return dir
}

// TestUnalignedSourcePieces: a source whose pieces are neither aligned nor cut at
// blocks costs copies through the bounce buffer, and nothing else: every write is still
// aligned, the log's contents are right. An aligned source costs less than a block
// copied at each end of a write.
func TestUnalignedSourcePieces(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 64 << 10, FS: alignFS{vfs.Default()}}
	l := openLog(t, dir, opts)
	mem := NewMemSource()
	src := &unalignedSource{inner: mem, rng: rand.New(rand.NewPCG(1, 2))}
	var want int64
	for round := range 60 {
		placeN(t, l, mem, 1+round*7%90)
		want += l.Pending()
		if _, err := l.Persist(src); err != nil {
			t.Fatal(err)
		}
	}
	if l.w.bw.copied != want {
		t.Fatalf("copied %d bytes of %d written from unaligned pieces", l.w.bw.copied, want)
	}
	if stats(t, l).Segments < 3 {
		t.Fatal("the test did not roll")
	}
	checkContents(t, l)
	// An aligned source: at most the partial first and last blocks are copied.
	for round := range 60 {
		segs := stats(t, l).Segments
		placeN(t, l, mem, 1+round*7%90)
		writes := int64(stats(t, l).Segments - segs + 1) // one per segment written to
		before := l.w.bw.copied
		if _, err := l.Persist(mem); err != nil {
			t.Fatal(err)
		}
		if c := l.w.bw.copied - before; c >= 2*Block*writes {
			t.Fatalf("round %d: %d bytes copied from an aligned source in %d writes", round, c, writes)
		}
	}
	reopenAndCheck(t, l, dir, opts)
}

// reopenAndCheck checks l's contents, closes it, reopens dir and checks that the log
// comes back at the same end with the same contents.
func reopenAndCheck(t *testing.T, l *Log, dir string, opts Options) {
	t.Helper()
	checkContents(t, l)
	next := l.Next()
	l.Close()
	l = openLog(t, dir, opts)
	if l.Next() != next {
		t.Fatalf("reopened at %d, want %d", l.Next(), next)
	}
	checkContents(t, l)
}

// TestBlockWriterModel writes random ranges of random bytes, given in pieces of random
// sizes and alignments, through a block writer, and checks the file after every write
// against a model: the bytes written, then zeros to the end of their last block. The
// tail carried between writes must reproduce the bytes before each write's start.
func TestBlockWriterModel(t *testing.T) {
	for seed := range uint64(4) {
		rng := rand.New(rand.NewPCG(seed, 7))
		path := filepath.Join(t.TempDir(), "f")
		f, _, err := alignFS{vfs.Default()}.OpenDirect(path, true)
		if err != nil {
			t.Fatal(err)
		}
		rf, err := os.Open(path) // O_DIRECT reads need aligned buffers: read through another
		if err != nil {
			t.Fatal(err)
		}
		defer rf.Close()
		var w blockWriter
		w.reset(f, 0, nil)
		var model []byte
		for range 200 {
			n := rng.IntN(3 * Block)
			if rng.IntN(8) == 0 {
				n = rng.IntN(80 * Block) // past the bounce buffer and many blocks
			}
			data := make([]byte, n)
			for i := range data {
				data[i] = byte(rng.Uint32()) | 1 // never zero: padding shows
			}
			pieces := splitPieces(rng, data, int64(len(model)))
			from := len(model) &^ (Block - 1) // the write's first block
			model = append(model, data...)
			if err := w.write(pieces, int64(len(model))); err != nil {
				t.Fatal(err)
			}
			end := (len(model) + Block - 1) &^ (Block - 1)
			got := make([]byte, end-from+1)
			m, _ := rf.ReadAt(got, int64(from))
			if m != end-from || !bytes.Equal(got[:len(model)-from], model[from:]) || !allZero(got[len(model)-from:m]) {
				t.Fatalf("seed %d: after writing to %d, the file from %d holds %d bytes, not the data then zeros to %d", seed, len(model), from, m, end)
			}
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got[:len(model)], model) {
			t.Fatalf("seed %d: the file differs from what was written", seed)
		}
		f.Close()
	}
}

// splitPieces cuts data, which goes at file position pos, into pieces the way a source
// may: at random points, some in aligned memory where their file position is aligned
// (as the write buffer's chunks), some not.
func splitPieces(rng *rand.Rand, data []byte, pos int64) [][]byte {
	var pieces [][]byte
	for len(data) > 0 {
		n := min(len(data), 1+rng.IntN(6*Block))
		var p []byte
		if rng.IntN(2) == 0 { // memory at the file position's offset in its block
			mem := alignedBlocks(n/Block + 2)
			off := int(pos % Block)
			p = mem[off : off+n]
		} else {
			p = make([]byte, n)
		}
		copy(p, data[:n])
		pieces, data, pos = append(pieces, p), data[n:], pos+int64(n)
	}
	return pieces
}

// TestTornRewriteOfPartialBlock: a crash while the block holding the end of durable data
// is rewritten with more (a padded block, then its rewrite) can leave any mix of the old
// and the new 512-byte sectors of that block and the next, and the next blocks written
// or not. Every such image reopens to at least the checkpoint, with valid batches only:
// the rewrite carries the same bytes below the old end.
func TestTornRewriteOfPartialBlock(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 64 << 10}
	l := openLog(t, dir, opts)
	src := NewMemSource()
	for _, pos := l.Tail(); pos%Block < 1000 || pos < 2*Block; _, pos = l.Tail() {
		placeN(t, l, src, 1)
		persistAll(t, l, src)
	}
	durable := l.Durable()
	seg := lastSegment(t, dir)
	old, _ := os.ReadFile(seg)
	_, oldEnd := l.Tail()
	placeN(t, l, src, 60) // the rewrite: the same block, and the next ones
	persistAll(t, l, src)
	written, _ := os.ReadFile(seg)
	_, newEnd := l.Tail()
	l.Close()
	if !bytes.Equal(old[:oldEnd], written[:oldEnd]) {
		t.Fatal("the rewrite changed bytes below the old end")
	}
	first := oldEnd &^ (Block - 1)
	const sector = 512
	sectors := int((newEnd - first + sector - 1) / sector)
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 200 {
		img := append([]byte(nil), old...)
		for k := range sectors { // each sector: old or new
			if rng.IntN(2) == 0 || round == 0 {
				at := first + int64(k)*sector
				copy(img[at:at+sector], written[at:at+sector])
			}
		}
		cdir := copyDir(t, dir)
		setRecoveryPoint(t, cdir, durable)
		if err := os.WriteFile(filepath.Join(cdir, filepath.Base(seg)), img, 0o644); err != nil {
			t.Fatal(err)
		}
		l, err := Open(cdir, opts)
		if err != nil {
			t.Fatalf("round %d: open: %v", round, err)
		}
		if l.Next()-1 < durable || l.Damage() != nil {
			t.Fatalf("round %d: opened at %d (damage %v), below the checkpoint %d", round, l.Next(), l.Damage(), durable)
		}
		checkContents(t, l)
		appendN(t, l, 3)
		checkContents(t, l)
		l.Close()
	}
}

// TestRecoverPreallocatedFiles: a closed log's active segment stays preallocated, and
// reopens at the end of its data, where Tail points; a sealed segment found with zeros
// after its data (its cut lost in a crash) is cut to its data at open, and is whole.
func TestRecoverPreallocatedFiles(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 16 << 10, Sync: SyncNever}
	l := openLog(t, dir, opts)
	next := appendN(t, l, 300)
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(files) < 3 {
		t.Fatalf("%d segments", len(files))
	}
	_, tail := l.Tail()
	l.Close()
	if size := fileSize(t, files[len(files)-1]); size != opts.SegmentBytes {
		t.Fatalf("the active segment is %d bytes, not preallocated to %d", size, opts.SegmentBytes)
	}
	sealed := fileSize(t, files[len(files)-2])
	if err := os.Truncate(files[len(files)-2], sealed+3*Block); err != nil { // as if its cut were lost
		t.Fatal(err)
	}
	setRecoveryPoint(t, dir, 0) // a crash long ago: every segment but the first is scanned
	l = openLog(t, dir, opts)
	if l.Next() != next || l.Damage() != nil {
		t.Fatalf("reopened at %d (damage %v), want %d", l.Next(), l.Damage(), next)
	}
	if seg, pos := l.Tail(); seg != segmentBase(t, files[len(files)-1]) || pos != tail {
		t.Fatalf("tail (%d, %d), want (%d, %d)", seg, pos, segmentBase(t, files[len(files)-1]), tail)
	}
	if size := fileSize(t, files[len(files)-2]); size != sealed {
		t.Fatalf("the sealed segment is %d bytes after open, want %d", size, sealed)
	}
	checkContents(t, l)
}

// TestTruncateNeedsNothingPending: Truncate refuses while placed bytes are not
// persisted; once they are, it cuts, and the log goes on writing from the cut, its
// partial block read back from the file.
func TestTruncateNeedsNothingPending(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 8 << 10}
	l := openLog(t, dir, opts)
	appendN(t, l, 100)
	var last int64
	l.WalkHeaders(0, func(h batch.Header) bool { last = h.LastOffset(); return h.LastOffset() < 150 })
	src := NewMemSource()
	placeN(t, l, src, 5)
	if err := l.Truncate(last); !errors.Is(err, ErrPending) {
		t.Fatalf("truncate with data pending: %v", err)
	}
	persistAll(t, l, src)
	if err := l.Truncate(last); err != nil {
		t.Fatal(err)
	}
	if l.Next() != last+1 || l.Written() != last+1 {
		t.Fatalf("after truncate: next %d written %d, want %d", l.Next(), l.Written(), last+1)
	}
	appendN(t, l, 50)
	reopenAndCheck(t, l, dir, opts)
}

// TestOffsetForTimeOfPlacedBatches: a time whose first batch is placed and not written
// is answered with Written: what the log holds is older, the rest is the owner's.
func TestOffsetForTimeOfPlacedBatches(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{SegmentBytes: 4 << 10})
	written := appendN(t, l, 50)
	src := NewMemSource()
	next := placeN(t, l, src, 80) // into later segments too
	for _, o := range []int64{written, written + 1, next - 1} {
		if got, err := l.OffsetForTime(tsAt(o)); err != nil || got != written {
			t.Fatalf("time of placed offset %d: %d %v, want %d", o, got, err, written)
		}
	}
	if got, err := l.OffsetForTime(tsAt(3)); err != nil || got > 3 {
		t.Fatalf("time of written offset 3: %d %v", got, err)
	}
	if got, _ := l.OffsetForTime(tsAt(next) + 1); got != next {
		t.Fatalf("a future time: %d, want %d", got, next)
	}
	persistAll(t, l, src)
	for o := written; o < next; o++ {
		r, _ := l.ReadRegion(o, 1)
		if got, err := l.OffsetForTime(tsAt(o)); err != nil || got != r.Offset {
			t.Fatalf("time of %d after persist: %d %v, want %d", o, got, err, r.Offset)
		}
		r.Release()
	}
}

// TestRetentionKeepsUnsealedSegments: retention never deletes a segment the persister
// has not sealed, whatever the limit says.
func TestRetentionKeepsUnsealedSegments(t *testing.T) {
	l := openLog(t, t.TempDir(), Options{SegmentBytes: 4 << 10, RetentionBytes: 1, Sync: SyncNever})
	appendN(t, l, 100)
	src := NewMemSource()
	placeN(t, l, src, 200) // several segments placed, none written
	n, err := l.ApplyRetention(l.Next())
	if err != nil {
		t.Fatal(err)
	}
	if l.Start() > l.Written() {
		t.Fatalf("retention deleted %d segments up to %d, past the written end %d", n, l.Start(), l.Written())
	}
	persistAll(t, l, src)
	checkContents(t, l)
}

// refuseDirect makes errorfs open files as on a filesystem that refuses O_DIRECT.
type refuseDirect struct{}

func (refuseDirect) MaybeError(op errorfs.Op, _ string) error {
	if op == errorfs.OpDirect {
		return unix.EINVAL
	}
	return nil
}

// TestPreallocationSteps: a segment file is preallocated one step ahead of its data, not
// to the whole segment size, so that quiet partitions do not reserve a segment of disk
// each.
func TestPreallocationSteps(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 1 << 30, Sync: SyncNever}
	l := openLog(t, dir, opts)
	appendN(t, l, 10)
	l.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(files) != 1 {
		t.Fatalf("%d segments", len(files))
	}
	if size := fileSize(t, files[0]); size != allocStep {
		t.Fatalf("the active segment is %d bytes, want one preallocation step (%d)", size, allocStep)
	}
	l = openLog(t, dir, opts) // recovery preallocates it again, from its data
	defer l.Close()
	if size := fileSize(t, files[0]); size != allocStep {
		t.Fatalf("after recovery the active segment is %d bytes, want %d", size, allocStep)
	}
}
