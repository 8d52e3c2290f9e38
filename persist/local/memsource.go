package local

import (
	"fmt"
	"sync"
	"time"

	"sluice/batch"
	"sluice/persist"
)

// MemSource is a persist.Source that keeps copies of placed batches in memory, laid out
// like the segment files: each segment's bytes in chunks of MemChunk bytes, each chunk
// starting at a Block-aligned address, so the pieces Bytes returns break at chunk
// boundaries and are aligned where the files are. It is the write buffer of writers
// that have none of their own (`sluice segment demo`, tests); the broker's is the
// engine's. Safe for concurrent use: the owner appends while the persister reads.
type MemSource struct {
	mu   sync.Mutex
	segs map[int64]map[int64][]byte // segment base -> chunk index -> chunk
}

// MemChunk is the size of a MemSource's chunks.
const MemChunk = 16 << 10

// NewMemSource returns an empty source.
func NewMemSource() *MemSource { return &MemSource{segs: map[int64]map[int64][]byte{}} }

// Append places the whole batch b at the end of l (Place, with now for rolls by age),
// stamps its base offset into b, and keeps a copy for the next Persist of l. b must
// hold exactly one batch whose header is valid; its CRC is not checked here (a broker
// checks it once, on arrival). Owner of l only.
//
// The source's lock is held across Place and the copy, so a Persist, which reads how
// far the log is placed in Settled, never sees a placement without its bytes (the rule
// of persist.Source). Lock order: Log.persistMu, MemSource.mu, then Log.mu.
func (s *MemSource) Append(l *Log, b []byte, now time.Time) (persist.Placement, error) {
	h, err := batch.ParseHeader(b)
	if err != nil {
		return persist.Placement{}, fmt.Errorf("%w: %w", ErrBadBatch, err)
	}
	if h.Size() != len(b) {
		return persist.Placement{}, fmt.Errorf("%w: %d bytes given, header says %d", ErrBadBatch, len(b), h.Size())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := l.Place(h, int64(len(b)), now)
	if err != nil {
		return p, err
	}
	batch.SetBaseOffset(b, p.Base)
	s.putLocked(p.Segment, p.Pos, b)
	return p, nil
}

// Settled implements persist.Source: f runs under the lock Append holds across Place
// and the copy.
func (s *MemSource) Settled(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
}

// Put copies b to position pos of segment seg.
func (s *MemSource) Put(seg, pos int64, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putLocked(seg, pos, b)
}

func (s *MemSource) putLocked(seg, pos int64, b []byte) {
	chunks := s.segs[seg]
	if chunks == nil {
		chunks = map[int64][]byte{}
		s.segs[seg] = chunks
	}
	for len(b) > 0 {
		k, off := pos/MemChunk, pos%MemChunk
		c := chunks[k]
		if c == nil {
			c = alignedBlocks(MemChunk / Block)
			chunks[k] = c
		}
		n := copy(c[off:], b)
		b, pos = b[n:], pos+int64(n)
	}
}

// Bytes implements persist.Source: one piece per chunk, in order. Bytes never put there
// are an error. It forgets every segment below seg: Persist asks for segments in order,
// and never again for one it has moved past.
func (s *MemSource) Bytes(seg, from, to int64, dst [][]byte) ([][]byte, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for base := range s.segs {
		if base < seg {
			delete(s.segs, base)
		}
	}
	chunks := s.segs[seg]
	for pos := from; pos < to; {
		k, off := pos/MemChunk, pos%MemChunk
		c := chunks[k]
		if c == nil {
			return dst, nil, fmt.Errorf("memory source holds no bytes at %d of segment %d", pos, seg)
		}
		n := min(int64(MemChunk)-off, to-pos)
		dst = append(dst, c[off:off+n])
		pos += n
	}
	return dst, nil, nil
}
