package hdfs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"path"
	"sort"

	"github.com/colinmarc/hdfs/v2"

	"sluice/batch"
)

var (
	// ErrCorrupt is wrapped by errors about data on HDFS that fails its checks (a batch
	// that is not whole, fails its CRC or breaks the offset order) below the end of the
	// partition's data there: it is never served.
	ErrCorrupt = errors.New("hdfs: corrupt data")
	// ErrOffsetNotFound is wrapped by Read's error for an offset HDFS does not hold:
	// below the first file, or at or past the end.
	ErrOffsetNotFound = errors.New("hdfs: offset not on HDFS")
	// ErrShortRead is wrapped by errors about a file that HDFS lists at one size and
	// then serves fewer bytes of (a replica behind its NameNode, or a file replaced
	// since the listing). It is never taken for a writer's torn tail, which lies within
	// the listed size: ending the data there would drop batches HDFS acknowledged, so
	// the read fails and is tried again.
	ErrShortRead = errors.New("hdfs: file shorter than listed")
)

// blockSize is the unit of reads from HDFS (Swift reads 1 MiB blocks too).
const blockSize = 1 << 20

// Cache keeps blocks of HDFS files in memory for readers (in the broker, the arena's
// block cache: one budget with the write buffers, under the same reclaimer). Blocks are
// BlockSize bytes, the last block of a file fewer; file is an id of the file's path.
// Safe for concurrent use.
type Cache interface {
	BlockSize() int
	// Get copies the cached block into dst (BlockSize bytes) and returns its length;
	// false when it is not cached.
	Get(file uint64, block int64, dst []byte) (int, bool)
	// Put caches a copy of the block (it may decline, for lack of room).
	Put(file uint64, block int64, data []byte)
}

// Reader reads one partition's batches from HDFS. It is used by one goroutine at a time.
type Reader struct {
	conn    *Conn
	cache   Cache // nil: none
	dir     string
	files   []fileView
	indexes map[string]*fileIndex   // loaded; nil for a file whose index is missing or bad
	learned map[string][]indexEntry // positions seen in files without an index (learn)
	cursor  struct {                // where the last read ended: the next one may start there
		name string
		at   indexEntry
	}
	open struct { // the file last read, kept open (readHDFS)
		name string
		fr   *hdfs.FileReader
		pos  int64 // where fr is positioned
	}
	// blocks are the last two blocks read: a batch that straddles two blocks is read
	// (header, then whole) without going back a block, which would cost the DataNode
	// stream.
	blocks [2]block
}

// block is a block of a file read from HDFS.
type block struct {
	name string
	at   int64
	b    []byte
}

// NewReader returns a reader of the partition whose files are in dir; Refresh lists
// them. cache may be nil.
func NewReader(conn *Conn, dir string, cache Cache) *Reader {
	return &Reader{conn: conn, cache: cache, dir: dir, indexes: map[string]*fileIndex{}, learned: map[string][]indexEntry{}}
}

// Refresh lists the partition's files again. A partition with no directory has no files.
func (r *Reader) Refresh(ctx context.Context) error {
	var infos []os.FileInfo
	err := r.conn.do(ctx, "list "+r.dir, func(cl *hdfs.Client) error {
		var err error
		infos, err = cl.ReadDir(r.dir)
		return err
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	r.files = trusted(infos)
	r.blocks = [2]block{}
	return nil
}

// Start returns the first offset on HDFS (as of the last Refresh), and false when there
// is none.
func (r *Reader) Start() (int64, bool) {
	if len(r.files) == 0 {
		return 0, false
	}
	return r.files[0].base, true
}

// End returns the offset after the last whole, valid batch on HDFS (as of the last
// Refresh), and false when there is none. It reads the last file's index, or scans
// the file when it has none (at most a file: Options.RollBytes).
func (r *Reader) End(ctx context.Context) (int64, bool, error) {
	for i := len(r.files) - 1; i >= 0; i-- {
		f := &r.files[i]
		if ix := r.index(ctx, f); ix != nil {
			return min(ix.next, f.end), true, nil
		}
		next, _, _, err := r.scan(ctx, f, 0, f.base, f.base, -1, nil)
		if err != nil {
			return 0, false, err
		}
		if next > f.base {
			return next, true, nil
		}
		// An empty last file (a round that never got acknowledged): the one before ends
		// the data, at this file's base at most.
	}
	return 0, false, nil
}

// Read returns whole batches, each checked against its CRC, from the one holding offset
// on, from one file, up to maxBytes but at least one batch, and the offset after them.
func (r *Reader) Read(ctx context.Context, offset int64, maxBytes int) ([]byte, int64, error) {
	i := sort.Search(len(r.files), func(i int) bool { return r.files[i].base > offset }) - 1
	for ; i >= 0 && i < len(r.files); i++ {
		f := &r.files[i]
		if offset >= f.end {
			continue
		}
		e := indexEntry{f.base, 0}
		if ix := r.index(ctx, f); ix != nil {
			e = ix.seek(offset)
		}
		if l := r.learned[f.name]; len(l) > 0 {
			if le := (&fileIndex{entries: l}).seek(offset); le.offset <= offset && le.pos > e.pos {
				e = le
			}
		}
		if c := r.cursor; c.name == f.name && c.at.offset <= offset && c.at.pos > e.pos {
			e = c.at // reading on from the last read
		}
		next, end, out, err := r.scan(ctx, f, e.pos, e.offset, offset, maxBytes, nil)
		if err != nil {
			return nil, 0, err
		}
		if len(out) > 0 {
			r.cursor.name, r.cursor.at = f.name, indexEntry{next, end}
			return out, next, nil
		}
		if i+1 < len(r.files) && next < f.end {
			return nil, 0, fmt.Errorf("%w: %s ends at offset %d, the next file starts at %d", ErrCorrupt, path.Join(r.dir, f.name), next, f.end)
		}
	}
	return nil, 0, fmt.Errorf("%w: offset %d in %s", ErrOffsetNotFound, offset, r.dir)
}

// scan walks f's batches from position pos, where the batch with base offset from
// starts, and collects those holding offset want or later, up to maxBytes but at least
// one (maxBytes < 0: none, just check every batch and find the end). It returns the
// offset after the last batch it walked. It stops at f's end (the next file's base) and
// at the end of the file's data. A batch that is cut short, fails its CRC or breaks the
// offset order is corruption, except at the end of the last file, where it is a torn
// tail (a writer that died mid-round) and ends the data: unless a valid batch follows
// it, which only damage explains.
func (r *Reader) scan(ctx context.Context, f *fileView, pos, from, want int64, maxBytes int, out []byte) (next, end int64, _ []byte, _ error) {
	next = from
	for pos < f.size && next < f.end {
		if maxBytes >= 0 && len(out) > 0 && len(out) >= maxBytes {
			break
		}
		// A batch below what was asked for is skipped by its header alone (its CRC is
		// checked when it is read); finding the end checks every batch.
		skip := maxBytes >= 0 && next < want
		h, b, bad, err := r.batchAt(ctx, f, pos, next, !skip)
		if err != nil {
			return 0, 0, nil, err
		}
		if skip && bad == nil && h.LastOffset() >= want {
			// The header says it holds want after all: read it whole.
			if h, b, bad, err = r.batchAt(ctx, f, pos, next, true); err != nil {
				return 0, 0, nil, err
			}
		}
		if bad == nil && (h.LastOffset() < want || maxBytes < 0) {
			b = nil // below what was asked for, or only finding the end: not collected
		}
		if bad != nil {
			if len(out) > 0 {
				// Serve the batches before it, as the local log does: the next read starts
				// at this one, and fails there (or finds a torn tail). Finding the end
				// collects nothing, so it goes on to tell damage from a torn tail.
				break
			}
			if f.end == math.MaxInt64 {
				valid, err := r.validAfter(ctx, f, pos, next, h)
				if err != nil {
					return 0, 0, nil, err // not knowing what follows is not a torn tail
				}
				if !valid {
					break // a torn tail
				}
			}
			return 0, 0, nil, fmt.Errorf("%w: %s at position %d: %v", ErrCorrupt, path.Join(r.dir, f.name), pos, bad)
		}
		r.learn(f, pos, next)
		if out == nil {
			out = b // the first batch: no copy
		} else {
			out = append(out, b...)
		}
		pos += int64(h.Size())
		next = h.LastOffset() + 1
	}
	return next, pos, out, nil
}

// learnEvery is the spacing of the positions a reader remembers in files without an
// index (the last file, until it is sealed), so that reading on or reading again does
// not scan from the file's start.
const learnEvery = 1 << 20

// learn remembers that the batch with base offset base starts at pos of f.
func (r *Reader) learn(f *fileView, pos, base int64) {
	l := r.learned[f.name]
	if n := len(l); n == 0 || (pos-l[n-1].pos >= learnEvery && base > l[n-1].offset) {
		r.learned[f.name] = append(l, indexEntry{base, pos})
	}
}

// batchAt reads the batch at pos of f, which should have base offset next, and checks
// it. bad says what is wrong with it (h is set when at least its header parsed); err is
// an I/O error.
func (r *Reader) batchAt(ctx context.Context, f *fileView, pos, next int64, whole bool) (h batch.Header, b []byte, bad, err error) {
	hb, err := r.readAt(ctx, f, pos, batch.HeaderSize)
	if errors.Is(err, errShortFile) {
		return h, nil, err, nil
	}
	if err != nil {
		return h, nil, nil, err
	}
	if h, bad = batch.ParseHeader(hb); bad != nil {
		// What the header's length and count fields say, unchecked: validAfter looks
		// past the bad batch with them.
		h = batch.Header{Length: binary.LittleEndian.Uint32(hb[8:]), Count: binary.LittleEndian.Uint32(hb[20:])}
		if h.Size() > batch.MaxSize {
			h = batch.Header{}
		}
		return h, nil, bad, nil
	}
	if h.BaseOffset != next {
		return h, nil, fmt.Errorf("base offset %d, want %d", h.BaseOffset, next), nil
	}
	if !whole {
		if pos+int64(h.Size()) > f.size {
			return h, nil, fmt.Errorf("batch of %d bytes at %d: %w", h.Size(), pos, errShortFile), nil
		}
		return h, nil, nil, nil
	}
	b, err = r.readAt(ctx, f, pos, h.Size())
	if errors.Is(err, errShortFile) {
		return h, nil, err, nil
	}
	if err != nil {
		return h, nil, nil, err
	}
	_, bad = batch.Check(b)
	return h, b, bad, nil
}

// validAfter reports whether a valid batch follows the bad one at pos, which should have
// had base offset next (h is its header, if it parsed): then the bad batch is damage, not
// a torn tail. It hops from batch to batch by what each one's length and record count
// say, over further bad batches too, until one is valid or a header gives no length
// (the end of the file's bytes gives none). So End calls a run of damaged batches
// followed by an intact one damage, as Read does: Read skips the batches below the offset
// asked for by their headers alone, CRC unchecked, and would serve that intact batch past
// an End that took the first damaged one for a torn tail. The walk is bounded by the
// file (each hop moves at least a header), and runs only when a bad batch is met. An
// I/O error on the way is returned: a read that failed shows nothing about the bytes it
// did not read, and taking it for a torn tail would put the end of the data before
// intact batches (a review found End doing so).
func (r *Reader) validAfter(ctx context.Context, f *fileView, pos, next int64, h batch.Header) (bool, error) {
	for h.Length != 0 && h.Count != 0 {
		pos, next = pos+int64(h.Size()), next+int64(h.Count)
		var bad, err error
		if h, _, bad, err = r.batchAt(ctx, f, pos, next, true); err != nil {
			return false, err
		}
		if bad == nil {
			return true, nil
		}
	}
	return false, nil
}

// errShortFile is readAt's error for bytes past the end of the file.
var errShortFile = errors.New("past the end of the file")

// readAt returns n bytes of f from pos, read in aligned blocks; the last two blocks read
// are kept for the next calls.
func (r *Reader) readAt(ctx context.Context, f *fileView, pos int64, n int) ([]byte, error) {
	if pos+int64(n) > f.size {
		return nil, fmt.Errorf("%d bytes at %d of %d: %w", n, pos, f.size, errShortFile)
	}
	var out []byte
	for len(out) < n {
		at := (pos + int64(len(out))) &^ (blockSize - 1)
		var blk *block
		for i := range r.blocks {
			if r.blocks[i].name == f.name && r.blocks[i].at == at && r.blocks[i].b != nil {
				blk = &r.blocks[i]
			}
		}
		if blk == nil {
			b, err := r.readBlock(ctx, f, at)
			if err != nil {
				return nil, err
			}
			r.blocks[0] = r.blocks[1]
			r.blocks[1] = block{name: f.name, at: at, b: b}
			blk = &r.blocks[1]
		}
		from := int(pos + int64(len(out)) - at)
		if from >= len(blk.b) {
			return nil, fmt.Errorf("block at %d of %s has %d bytes: %w", at, f.name, len(blk.b), errShortFile)
		}
		if len(out) == 0 && from+n <= len(blk.b) {
			return blk.b[from : from+n : from+n], nil // within one block: no copy (blocks are never written)
		}
		out = append(out, blk.b[from:min(len(blk.b), from+n-len(out))]...)
	}
	return out, nil
}

// readBlock reads the block of f at position at (up to blockSize bytes, fewer at the
// end of the file): from the cache when it holds all of it, else from HDFS, caching
// what it read. Only whole cache blocks are cached, and a file's short last block only
// once the file is sealed: appends never change bytes already in a file, so a cached
// block never goes stale (a file is replaced under the same name only by the same
// epoch's retry of a round never acknowledged, with the same batches).
func (r *Reader) readBlock(ctx context.Context, f *fileView, at int64) ([]byte, error) {
	buf := make([]byte, min(blockSize, f.size-at))
	p := path.Join(r.dir, f.name)
	if r.cache != nil {
		if r.fromCache(fileID(p), at, buf) {
			return buf, nil
		}
	}
	if err := r.readHDFS(ctx, p, at, buf); err != nil {
		return nil, err
	}
	if r.cache != nil {
		id, cb := fileID(p), r.cache.BlockSize()
		for i := 0; i < len(buf); i += cb {
			if n := min(cb, len(buf)-i); n == cb || f.index {
				r.cache.Put(id, (at+int64(i))/int64(cb), buf[i:i+n])
			}
		}
	}
	return buf, nil
}

// fromCache fills buf, the bytes of a file from position at, from the cache; false
// unless every block is there.
func (r *Reader) fromCache(id uint64, at int64, buf []byte) bool {
	cb := r.cache.BlockSize()
	if blockSize%cb != 0 {
		return false
	}
	for i := 0; i < len(buf); i += cb {
		want := min(cb, len(buf)-i)
		tmp := buf[i : i+want]
		if want < cb {
			tmp = make([]byte, cb)
		}
		n, ok := r.cache.Get(id, (at+int64(i))/int64(cb), tmp)
		if !ok || n < want {
			return false
		}
		copy(buf[i:], tmp[:want])
	}
	return true
}

// fileID names a file for the cache: FNV-1a of its path.
func fileID(p string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(p))
	return h.Sum64()
}

// readHDFS reads buf from the file at p, from position at.
func (r *Reader) readHDFS(ctx context.Context, p string, at int64, buf []byte) error {
	// The file stays open between reads: a FileReader reading on from where it stopped
	// keeps its DataNode stream, where a fresh one per block pays a NameNode call and a
	// new DataNode connection each time (20x slower in BenchmarkReadHDFS).
	// Reading on uses Read, not ReadAt: colinmarc/hdfs's ReadAt seeks, and a seek of 0
	// bytes drops the DataNode stream (BlockReader.Skip refuses n <= 0).
	fr := r.open.fr
	if r.open.name != p || (fr != nil && at+int64(len(buf)) > fr.Stat().Size()) {
		fr = nil // another file, or this one has grown since it was opened
	}
	onward := fr != nil && r.open.pos == at
	var opened *hdfs.FileReader
	err := r.conn.do(ctx, "read "+p, func(cl *hdfs.Client) error {
		f := fr
		if f == nil {
			var err error
			if f, err = cl.Open(p); err != nil {
				return err
			}
			opened = f
		}
		if onward {
			_, err := io.ReadFull(f, buf)
			return err
		}
		_, err := f.ReadAt(buf, at)
		return err
	})
	r.open.pos = at + int64(len(buf))
	switch {
	case err != nil:
		// Dropped, not closed: after a timeout the abandoned call may still use it (the
		// connection's reset ends it).
		r.open.fr, r.open.name = nil, ""
	case opened != nil:
		if r.open.fr != nil {
			go r.open.fr.Close() // never waits on the network
		}
		r.open.fr, r.open.name = opened, p
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %s: %d bytes at %d: %w", ErrShortRead, p, len(buf), at, err)
	}
	return err
}

// index returns f's index, reading it the first time; nil when f has none (not sealed)
// or it cannot be used (then the reader scans the file).
func (r *Reader) index(ctx context.Context, f *fileView) *fileIndex {
	if !f.index {
		return nil
	}
	if ix, ok := r.indexes[f.name]; ok {
		return ix
	}
	p := path.Join(r.dir, f.name+indexSuffix)
	var b []byte
	err := r.conn.do(ctx, "read "+p, func(cl *hdfs.Client) error {
		var err error
		b, err = cl.ReadFile(p)
		return err
	})
	if err != nil {
		return nil // not remembered: read again next time
	}
	ix, err := decodeIndex(b, f.base)
	if err != nil || ix.size > f.size {
		ix = nil
	}
	r.indexes[f.name] = ix
	return ix
}
