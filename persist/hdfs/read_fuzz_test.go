package hdfs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path"
	"sort"
	"testing"

	"sluice/batch"
	"sluice/internal/crc32c"
)

// The reader decodes what it reads from HDFS files into batches in scan and batchAt, on
// bytes that come through readAt: from its Cache when the cache holds every block asked
// for, from HDFS only otherwise. A Reader whose cache holds whole files (memCache) thus
// decodes them with no HDFS and no change to its code: its conn is nil, so a read that
// missed the cache would panic, and the fuzz target would report it.

// memCache is a Cache holding whole files by fileID, in blocks of memBlock bytes (a
// divisor of blockSize, so the reader assembles each of its blocks from several).
type memCache struct{ files map[uint64][]byte }

const memBlock = 4 << 10

func (memCache) BlockSize() int { return memBlock }

func (c memCache) Get(file uint64, block int64, dst []byte) (int, bool) {
	b, ok := c.files[file]
	if !ok || block < 0 || block*memBlock >= int64(len(b)) {
		return 0, false
	}
	return copy(dst, b[block*memBlock:min((block+1)*memBlock, int64(len(b)))]), true
}

func (memCache) Put(uint64, int64, []byte) {}

// fixBatches makes the batches of data that mask selects (bit i%8 for the i-th, as far
// as their length fields chain through data) carry the base offset of a dense run from
// base and a matching CRC, so that mutations get past the CRC to the checks behind it.
func fixBatches(data []byte, base int64, mask uint8) {
	le := binary.LittleEndian
	o := base
	for pos, i := 0, 0; len(data)-pos >= batch.HeaderSize; i++ {
		size := 12 + int(le.Uint32(data[pos+8:]))
		if size < batch.HeaderSize || size > len(data)-pos {
			return
		}
		b := data[pos : pos+size]
		if mask>>(i%8)&1 != 0 {
			batch.SetBaseOffset(b, o)
			le.PutUint32(b[12:], crc32c.Checksum(b[16:]))
		}
		o += int64(le.Uint32(b[20:]))
		pos += size
	}
}

// span is a batch of a file: its offsets and where it lies.
type span struct {
	base, last int64
	pos, size  int
}

// validRun returns the run of whole valid batches at the front of data (the first at
// base, each following the last), the offset after it and its size in bytes.
func validRun(data []byte, base int64) ([]span, int64, int) {
	var run []span
	next, pos := base, 0
	for pos < len(data) && next < math.MaxInt64 {
		h, err := batch.Check(data[pos:])
		if err != nil || h.BaseOffset != next {
			break
		}
		run = append(run, span{h.BaseOffset, h.LastOffset(), pos, h.Size()})
		pos += h.Size()
		next = h.LastOffset() + 1
	}
	return run, next, pos
}

// find returns the span of run holding offset o.
func find(run []span, o int64) (int, bool) {
	k := sort.Search(len(run), func(k int) bool { return run[k].last >= o })
	return k, k < len(run) && run[k].base <= o
}

// FuzzRead decodes an arbitrary data file through a Reader, as the partition's last
// file or followed by an intact file of a newer epoch starting next offsets after its
// base (which then ends it). With mask, chosen batches get their offsets and CRCs set
// right first, so that mutations reach the checks behind the CRC. It checks:
//   - no panic, and no read of HDFS (the cache holds the files);
//   - End: with a following file, that file's end; else where the file's run of whole
//     valid batches from its base ends (none when the run is empty), or ErrCorrupt, only
//     when bytes follow the run;
//   - every read, from each file's base on until one fails, then at one more offset
//     anywhere: it serves whole batches that pass batch.Check, the first holding the
//     offset asked for, each following the last, each byte for byte the one in its
//     file, up to maxBytes but at least one batch, and answers the offset after them;
//     or it fails with ErrCorrupt or ErrOffsetNotFound;
//   - a read fails only at an offset outside the valid run (below the following file)
//     and the following file: one that goes on past the run (it holds less than
//     maxBytes there) serves the intact batches before the damage, and the next read,
//     at the damage, fails;
//   - a read at the end of the run fails: ErrOffsetNotFound when End found no damage,
//     ErrCorrupt when it did;
//   - in the last file, a read at or past the End it gave fails: no batch is served
//     beyond what End calls the end of the data. (Batches below the offset asked for are
//     skipped by their headers, CRC unchecked, so this needs End to call a run of damaged
//     batches followed by an intact one damage, not a torn tail: a seed below.)
func FuzzRead(f *testing.F) {
	const base = 1000
	a, aEnd := batches(base, 12, "a")
	torn := batchAt(aEnd, "a")
	flipped := bytes.Clone(a)
	flipped[len(a)/2] ^= 0x40
	lastFlipped := bytes.Clone(a)
	lastFlipped[len(a)-5] ^= 0x40
	// The records of the third and second last batches damaged: no valid batch follows
	// the first, but one follows the second, so End finds damage, not a torn tail (it
	// used to stop at the first, and a read at the last batch served it past End).
	twoFlipped := bytes.Clone(a)
	{
		run, _, _ := validRun(a, base)
		n := len(run)
		twoFlipped[run[n-3].pos+batch.HeaderSize] ^= 0x40
		twoFlipped[run[n-2].pos+batch.HeaderSize] ^= 0x40
	}
	for _, s := range []struct {
		data               []byte
		mask               uint8
		next, maxBytes, at uint16
	}{
		{a, 0, 0, 4096, 7},
		{a, 0, 0, 0, 0},
		{a, 0, uint16(aEnd - base), 512, uint16(aEnd - base + 2)}, // the next file where this one ends
		{a, 0, 10, 1 << 15, 12},                                   // it starts within this one
		{append(bytes.Clone(a), torn[:len(torn)-7]...), 0, 0, 4096, uint16(aEnd - base)},
		{append(bytes.Clone(a), torn[:batch.HeaderSize-1]...), 0, 0, 100, 3},
		{flipped, 0, 0, 4096, 30},
		{flipped, 0, 0, 100, 30},
		{flipped, 0, uint16(aEnd - base), 4096, 30},
		{lastFlipped, 0, 0, 4096, 30},
		{flipped, 0xff, 0, 4096, 30},
		{twoFlipped, 0, 0, 4096, uint16(aEnd - base + 7)},
		{nil, 0, 0, 4096, 0},
		{[]byte("not a batch at all, and not a header either: just junk bytes for the reader"), 0xff, 0, 4096, 0},
	} {
		f.Add(s.data, s.mask, s.next, s.maxBytes, s.at)
	}
	const dir = "/fuzz/topic/0"
	f.Fuzz(func(t *testing.T, data []byte, mask uint8, next, maxBytes, at uint16) {
		ctx := context.Background()
		data = bytes.Clone(data)
		fixBatches(data, base, mask)
		aRun, aEnd, aBytes := validRun(data, base)
		name := fileName(base, 1)
		infos := []os.FileInfo{fakeInfo{name, int64(len(data))}}
		cache := memCache{files: map[uint64][]byte{fileID(path.Join(dir, name)): data}}
		bBase, bEnd := int64(math.MaxInt64), int64(0)
		var bData []byte
		var bRun []span
		if next > 0 {
			bBase = base + int64(next)
			bData, bEnd = batches(bBase, 5, "b")
			bRun, _, _ = validRun(bData, bBase)
			name := fileName(bBase, 2)
			infos = append(infos, fakeInfo{name, int64(len(bData))})
			cache.files[fileID(path.Join(dir, name))] = bData
		}
		r := NewReader(nil, dir, cache)
		r.files = trusted(infos)

		end, ok, endErr := r.End(ctx)
		switch {
		case next > 0:
			if endErr != nil || !ok || end != bEnd {
				t.Fatalf("End = %d, %v, %v; the last file ends at %d", end, ok, endErr, bEnd)
			}
		case endErr != nil:
			if !errors.Is(endErr, ErrCorrupt) || aBytes == len(data) {
				t.Fatalf("End: %v, after a valid run to %d of %d bytes of %d", endErr, aEnd, aBytes, len(data))
			}
		case aEnd > base && (!ok || end != aEnd), aEnd == base && ok:
			t.Fatalf("End = %d, %v; the valid run ends at %d", end, ok, aEnd)
		}

		// served reports whether a read at o must serve it.
		served := func(o int64) bool {
			if o >= bBase {
				return o < bEnd
			}
			_, ok := find(aRun, o)
			return ok
		}
		// read reads at o and checks the answer; false when the read failed.
		read := func(o int64) (int64, bool) {
			out, n, err := r.Read(ctx, o, int(maxBytes))
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrOffsetNotFound) || served(o) {
					t.Fatalf("read at %d (the valid run ends at %d, the next file runs from %d to %d): %v", o, aEnd, bBase, bEnd, err)
				}
				return 0, false
			}
			want, size, count := o, 0, 0
			for rest := out; len(rest) > 0; rest = rest[size:] {
				h, err := batch.Check(rest)
				if err != nil {
					t.Fatalf("read at %d served a bad batch at %d: %v", o, len(out)-len(rest), err)
				}
				if count == 0 && (h.BaseOffset > o || h.LastOffset() < o) || count > 0 && h.BaseOffset != want {
					t.Fatalf("read at %d served batch %d of offsets %d to %d, want it from %d", o, count, h.BaseOffset, h.LastOffset(), want)
				}
				size = h.Size()
				if !fromFile(rest[:size], h.BaseOffset, data, aRun, bData, bRun, bBase) {
					t.Fatalf("read at %d served a batch at %d that is not in its file", o, h.BaseOffset)
				}
				want, count = h.LastOffset()+1, count+1
			}
			if count == 0 || n != want || count > 1 && len(out)-size >= int(maxBytes) {
				t.Fatalf("read at %d (max %d bytes) served %d batches, %d bytes, to %d, and answered %d", o, maxBytes, count, len(out), want, n)
			}
			return n, true
		}
		for _, o := range []int64{base, bBase} {
			for ok := o < math.MaxInt64; ok; o, ok = read(o) {
			}
		}
		if next == 0 && (aEnd > base || endErr != nil) {
			_, _, err := r.Read(ctx, aEnd, int(maxBytes))
			if endErr == nil && !errors.Is(err, ErrOffsetNotFound) || endErr != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("read at the end of the valid run, %d (End: %v): %v", aEnd, endErr, err)
			}
		}
		o := base - 8 + int64(at)
		if _, served := read(o); served && next == 0 && endErr == nil && (!ok || o >= end) {
			t.Fatalf("read at %d served records past End (%d, %v)", o, end, ok)
		}
	})
}

// fromFile reports whether b, a batch served with base offset o, is the batch its file
// holds: the following file's (bData, which starts at bBase) at or past bBase, else the
// fuzzed file's, in its valid run or anywhere past it.
func fromFile(b []byte, o int64, data []byte, aRun []span, bData []byte, bRun []span, bBase int64) bool {
	file, run := data, aRun
	if o >= bBase {
		file, run = bData, bRun
	}
	if k, ok := find(run, o); ok {
		return run[k].base == o && bytes.Equal(b, file[run[k].pos:run[k].pos+run[k].size])
	}
	return o < bBase && bytes.Contains(data, b)
}
