package hdfs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"
)

// The index of a sealed data file (<name>.index), little-endian:
//
//	 0  magic "SLIX"             4 bytes
//	 4  version                  uint32 = 1
//	 8  next offset              int64   after the file's last batch
//	16  data size                int64   bytes of batches in the file
//	24  entries, each 16 bytes:  offset int64, position int64 (of a batch's first byte)
//	 n  crc                      uint32  CRC32C of bytes [0, n)
//
// Entries are in increasing order, the first at position 0, then one every
// IndexInterval bytes of data or more (at the first batch starting past the interval).

const (
	indexMagic   = "SLIX"
	indexVersion = 1
	indexHeader  = 24
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// indexEntry is where a batch starts in a data file.
type indexEntry struct{ offset, pos int64 }

// fileIndex is a data file's index.
type fileIndex struct {
	next    int64 // the offset after the file's last batch
	size    int64 // bytes of batches in the file
	entries []indexEntry
}

func (ix *fileIndex) encode() []byte {
	b := make([]byte, indexHeader, indexHeader+16*len(ix.entries)+4)
	copy(b, indexMagic)
	binary.LittleEndian.PutUint32(b[4:], indexVersion)
	binary.LittleEndian.PutUint64(b[8:], uint64(ix.next))
	binary.LittleEndian.PutUint64(b[16:], uint64(ix.size))
	for _, e := range ix.entries {
		b = binary.LittleEndian.AppendUint64(b, uint64(e.offset))
		b = binary.LittleEndian.AppendUint64(b, uint64(e.pos))
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

// errBadIndex is wrapped by decodeIndex's errors: the reader then does without the index.
var errBadIndex = errors.New("bad index")

// decodeIndex reads an index; base is the data file's base offset, for the checks.
func decodeIndex(b []byte, base int64) (*fileIndex, error) {
	if len(b) < indexHeader+4 || (len(b)-indexHeader-4)%16 != 0 {
		return nil, fmt.Errorf("%w: %d bytes", errBadIndex, len(b))
	}
	body := b[:len(b)-4]
	if got, want := crc32.Checksum(body, crcTable), binary.LittleEndian.Uint32(b[len(body):]); got != want {
		return nil, fmt.Errorf("%w: crc %x, computed %x", errBadIndex, want, got)
	}
	if string(b[:4]) != indexMagic || binary.LittleEndian.Uint32(b[4:]) != indexVersion {
		return nil, fmt.Errorf("%w: magic or version", errBadIndex)
	}
	ix := &fileIndex{next: int64(binary.LittleEndian.Uint64(b[8:])), size: int64(binary.LittleEndian.Uint64(b[16:]))}
	prev := indexEntry{offset: base - 1, pos: -1}
	for p := indexHeader; p < len(body); p += 16 {
		e := indexEntry{int64(binary.LittleEndian.Uint64(b[p:])), int64(binary.LittleEndian.Uint64(b[p+8:]))}
		if e.offset <= prev.offset || e.pos <= prev.pos || e.pos >= ix.size || e.offset >= ix.next {
			return nil, fmt.Errorf("%w: entry %d out of order", errBadIndex, len(ix.entries))
		}
		ix.entries = append(ix.entries, e)
		prev = e
	}
	if len(ix.entries) == 0 || ix.entries[0] != (indexEntry{base, 0}) {
		return nil, fmt.Errorf("%w: does not start at the file's base", errBadIndex)
	}
	return ix, nil
}

// seek returns the last entry at or below offset (the first entry when none is).
func (ix *fileIndex) seek(offset int64) indexEntry {
	i := sort.Search(len(ix.entries), func(i int) bool { return ix.entries[i].offset > offset })
	return ix.entries[max(i-1, 0)]
}
