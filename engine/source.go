package engine

import (
	"fmt"

	"sluice/memarena"
)

// The write buffer as the store's source of bytes (persist.Source): the persister asks for
// a segment's file range, and gets the arena memory that holds it, held until the store
// has written it. The buffer's stream follows the files (docs/writepath.md §1): segment
// seg's byte pos is at stream position start+pos, start being where the segment began.

// segStart records where a segment's byte 0 lies in the write buffer's stream.
type segStart struct {
	seg   int64 // the segment's base offset
	start int64 // its stream position, a multiple of the block size
}

// Bytes implements persist.Source. Persister only (it uses the partition's persister
// scratch); it takes the append lock briefly to look the segment up.
func (p *Partition) Bytes(seg, from, to int64, dst [][]byte) ([][]byte, func(), error) {
	start, ok := p.streamStart(seg)
	if !ok {
		return dst, nil, fmt.Errorf("cannot read segment %d of %s/%d from memory: %w", seg, p.topic, p.id, memarena.ErrMiss)
	}
	spans, err := p.buf.Range(start+from, start+to, p.held[:0])
	if err != nil {
		memarena.ReleaseAll(spans)
		return dst, nil, fmt.Errorf("cannot read bytes [%d, %d) of segment %d of %s/%d from memory: %w", from, to, seg, p.topic, p.id, err)
	}
	p.held = spans
	for i := range spans {
		dst = append(dst, spans[i].Bytes())
	}
	return dst, p.release, nil
}

// Settled implements persist.Source: f runs under the append lock, which an appender
// holds across Place and the copy into the write buffer, so the store never sees a
// placement without its bytes.
func (p *Partition) Settled(f func()) {
	p.app.Lock()
	defer p.app.Unlock()
	f()
}

// releaseHeld releases what Bytes held (p.release).
func (p *Partition) releaseHeld() { p.held = memarena.ReleaseAll(p.held) }

// streamStart returns where segment seg starts in the stream, and forgets the segments
// before it: the store asks for segments in order, so those are written.
func (p *Partition) streamStart(seg int64) (int64, bool) {
	p.app.Lock()
	defer p.app.Unlock()
	for i, s := range p.app.segs {
		if s.seg == seg {
			if i > 0 {
				p.app.segs = append(p.app.segs[:0], p.app.segs[i:]...)
			}
			return s.start, true
		}
	}
	return 0, false
}
