package local

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Sizes of on-disk index entries (docs/format.md §2).
const (
	indexEntrySize     = 12
	timeIndexEntrySize = 16
)

// offsetEntry maps a batch's offset, relative to the segment base, to its file position.
type offsetEntry struct {
	rel uint32
	pos int64
}

// timeEntry records the segment's maximum timestamp up to and including a batch.
type timeEntry struct {
	ts     int64
	offset int64
}

// index is the sparse offset and time index of one segment, held in memory.
//
// Entries are only ever appended or, on truncation, replaced by a fresh copy; an existing
// backing array is never written below its length. So a reader may keep a snapshot of the
// slices (taken under Log.mu) and search it without the lock while the writer appends.
type index struct {
	offs  []offsetEntry
	times []timeEntry
	// Bytes of log since the last entry of each kind; writer only.
	sinceOff, sinceTime int64
	maxTs               int64 // largest timestamp in the segment
	maxTsOffset         int64 // base offset of the batch that last raised maxTs
}

// newIndex returns an empty index.
func newIndex() *index { return &index{maxTs: math.MinInt64} }

// add records the batch at pos (base offset, max timestamp, size) in the index.
func (x *index) add(segBase, base, maxTs, pos, size, interval int64) {
	if len(x.offs) == 0 || x.sinceOff >= interval {
		x.offs = append(x.offs, offsetEntry{rel: uint32(base - segBase), pos: pos})
		x.sinceOff = 0
	}
	if len(x.times) == 0 || (maxTs > x.maxTs && x.sinceTime >= interval) {
		x.times = append(x.times, timeEntry{ts: max(maxTs, x.maxTs), offset: base})
		x.sinceTime = 0
	}
	if maxTs > x.maxTs {
		x.maxTs, x.maxTsOffset = maxTs, base
	}
	x.sinceOff += size
	x.sinceTime += size
}

// seal appends a final time entry for the segment's maximum timestamp when the entries
// do not already end with it, so that a sealed segment's time index states its maximum.
func (x *index) seal() {
	if n := len(x.times); n > 0 && x.times[n-1].ts < x.maxTs {
		x.times = append(x.times, timeEntry{ts: x.maxTs, offset: x.maxTsOffset})
	}
}

// floor returns the position of the last entry whose relative offset is at most rel, and
// that entry's relative offset. The index must not be empty.
func floor(offs []offsetEntry, rel uint32) (pos int64, at uint32) {
	lo, hi := 0, len(offs) // invariant: offs[lo-1].rel <= rel < offs[hi].rel
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if offs[mid].rel <= rel {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return offs[0].pos, offs[0].rel
	}
	return offs[lo-1].pos, offs[lo-1].rel
}

// lastStartWithin returns the last entry whose position is past from and at most limit,
// or ok=false. Entries mark batch starts, so such an entry ends a run of whole batches.
func lastStartWithin(offs []offsetEntry, from, limit int64) (offsetEntry, bool) {
	lo, hi := 0, len(offs) // first index with pos > limit
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if offs[mid].pos <= limit {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 || offs[lo-1].pos <= from {
		return offsetEntry{}, false
	}
	return offs[lo-1], true
}

// timeFloor returns the offset to start scanning from to find the first batch whose
// max timestamp is at least ts: the entry before the first entry with timestamp >= ts.
func timeFloor(times []timeEntry, ts int64) int64 {
	lo, hi := 0, len(times)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if times[mid].ts < ts {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return times[0].offset
	}
	return times[lo-1].offset
}

// crcTable is CRC32C (Castagnoli), which index files end with; read-only after init.
var crcTable = crc32.MakeTable(crc32.Castagnoli)

// trailerSize is the CRC32C at the end of an index file. Index files are written whole
// through a rename, so a bad trailer means the file was damaged or is not ours.
const trailerSize = 4

// encodeOffsets appends the .index file form of offs to dst.
func encodeOffsets(dst []byte, offs []offsetEntry) []byte {
	start := len(dst)
	for _, e := range offs {
		dst = binary.LittleEndian.AppendUint32(dst, e.rel)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(e.pos))
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], crcTable))
}

// encodeTimes appends the .timeindex file form of times to dst.
func encodeTimes(dst []byte, times []timeEntry) []byte {
	start := len(dst)
	for _, e := range times {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(e.ts))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(e.offset))
	}
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], crcTable))
}

// checkTrailer verifies an index file's CRC32C trailer and returns the entries' bytes.
func checkTrailer(b []byte, entrySize int) ([]byte, error) {
	if len(b) < entrySize+trailerSize || (len(b)-trailerSize)%entrySize != 0 {
		return nil, fmt.Errorf("index file size %d is not n*%d+%d", len(b), entrySize, trailerSize)
	}
	body := b[:len(b)-trailerSize]
	if got, want := binary.LittleEndian.Uint32(b[len(body):]), crc32.Checksum(body, crcTable); got != want {
		return nil, fmt.Errorf("index file checksum %#x, want %#x", got, want)
	}
	return body, nil
}

// decodeOffsets parses and checks an .index file of a segment of size logSize: entries
// strictly increasing, the first at (0, 0), every position inside the log.
func decodeOffsets(b []byte, logSize int64) ([]offsetEntry, error) {
	b, err := checkTrailer(b, indexEntrySize)
	if err != nil {
		return nil, err
	}
	offs := make([]offsetEntry, len(b)/indexEntrySize)
	for i := range offs {
		e := b[i*indexEntrySize:]
		offs[i] = offsetEntry{rel: binary.LittleEndian.Uint32(e), pos: int64(binary.LittleEndian.Uint64(e[4:]))}
		switch {
		case i == 0 && (offs[i].rel != 0 || offs[i].pos != 0):
			return nil, fmt.Errorf("first index entry is (%d, %d), want (0, 0)", offs[i].rel, offs[i].pos)
		case i > 0 && (offs[i].rel <= offs[i-1].rel || offs[i].pos <= offs[i-1].pos):
			return nil, fmt.Errorf("index entry %d does not increase", i)
		case offs[i].pos >= logSize:
			return nil, fmt.Errorf("index entry %d points past the log (%d >= %d)", i, offs[i].pos, logSize)
		}
	}
	return offs, nil
}

// decodeTimes parses and checks a .timeindex file of a segment holding [base, next).
func decodeTimes(b []byte, base, next int64) ([]timeEntry, error) {
	b, err := checkTrailer(b, timeIndexEntrySize)
	if err != nil {
		return nil, err
	}
	times := make([]timeEntry, len(b)/timeIndexEntrySize)
	for i := range times {
		e := b[i*timeIndexEntrySize:]
		times[i] = timeEntry{ts: int64(binary.LittleEndian.Uint64(e)), offset: int64(binary.LittleEndian.Uint64(e[8:]))}
		switch {
		case i == 0 && times[i].offset != base:
			return nil, fmt.Errorf("first time index entry is at offset %d, want %d", times[i].offset, base)
		case i > 0 && (times[i].ts < times[i-1].ts || times[i].offset <= times[i-1].offset):
			return nil, fmt.Errorf("time index entry %d does not increase", i)
		case times[i].offset >= next:
			return nil, fmt.Errorf("time index entry %d points past the segment (%d >= %d)", i, times[i].offset, next)
		}
	}
	return times, nil
}
