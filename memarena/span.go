package memarena

import (
	"fmt"
	"sync"
)

// Span is a held piece of one chunk: the chunk is not reused until the span
// is released, even if its owner reclaims or closes meanwhile. Spans from
// WriteBuffer.Read and BlockCache.Get are read-only; a span from Arena.Alloc
// may be written. A Span is a plain value for the caller's slice; release
// each one exactly once, through a pointer to it.
type Span struct {
	a      *Arena
	id     uint32
	gen    uint32
	off, n uint32 // the bytes [off, off+n) of the chunk
	token  uint64 // hold token, under invariants only
}

// releasedID marks a span that was released; a second release is caught.
const releasedID = ^uint32(0)

// Bytes returns the span's memory. It is valid until Release.
func (s *Span) Bytes() []byte {
	if s.a == nil || s.id == releasedID {
		return nil
	}
	return s.a.chunkData(s.id)[s.off : s.off+s.n : s.off+s.n]
}

// Len returns len(s.Bytes()).
func (s *Span) Len() int { return int(s.n) }

// Chunk returns the id of the chunk the span lies in.
func (s *Span) Chunk() uint32 { return s.id }

// Release drops the span's hold and clears it. Releasing a span twice, or a
// zero Span, is a bug: under the invariants build tag it panics with
// "BUG: ..."; otherwise it is counted in Stats.BadReleases and ignored.
func (s *Span) Release() {
	a, id, gen, token := s.a, s.id, s.gen, s.token
	*s = Span{a: a, id: releasedID}
	switch {
	case a == nil:
		if invariantsOn {
			panic("BUG: memarena: release of a zero Span")
		}
		return
	case id == releasedID:
		a.badRelease("double release of a span")
		return
	}
	if invariantsOn {
		a.holds.remove(token, id)
	}
	if a.meta(id).gen != gen {
		a.badRelease("release of a stale span of chunk %d (reused since)", id)
		return
	}
	a.unref(id)
}

// ReleaseAll releases every span in spans and returns spans[:0].
func ReleaseAll(spans []Span) []Span {
	for i := range spans {
		spans[i].Release()
	}
	return spans[:0]
}

// spanOf wraps a reference the caller already holds on chunk id into a Span
// covering chunk bytes [off, off+n).
func (a *Arena) spanOf(id uint32, off, n int64) Span {
	s := Span{a: a, id: id, gen: a.meta(id).gen, off: uint32(off), n: uint32(n)}
	if invariantsOn {
		s.token = a.holds.add(id)
	}
	return s
}

// holdSpan takes a new reference on chunk id for a reader. The caller holds
// the lock of the chunk's owner, so the chunk cannot be freed meanwhile.
func (a *Arena) holdSpan(id uint32, off, n int64) Span {
	a.ref(id)
	return a.spanOf(id, off, n)
}

// holdSet records every live span under invariants, so that releasing a copy
// of an already released span is caught too.
type holdSet struct {
	mu   sync.Mutex
	next uint64
	live map[uint64]uint32 // token -> chunk id
}

func (h *holdSet) add(id uint32) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.live == nil {
		h.live = make(map[uint64]uint32)
	}
	h.next++
	h.live[h.next] = id
	return h.next
}

func (h *holdSet) remove(token uint64, id uint32) {
	h.mu.Lock()
	got, ok := h.live[token]
	delete(h.live, token)
	h.mu.Unlock()
	if !ok || got != id {
		panic(fmt.Sprintf("BUG: memarena: double release of a span of chunk %d", id))
	}
}
