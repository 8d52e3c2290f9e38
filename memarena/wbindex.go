package memarena

import (
	"math"
	"sync"
)

// A write buffer is one byte stream cut into chunks, laid out as the
// partition's segment files are (docs/writepath.md §1): a batch at file
// position pos of a segment lies at stream position segStart+pos. Stream
// positions are int64s that only grow; chunks start at multiples of
// ChunkSize, the chain's first chunk at the buffer's headPos, and chunk k
// covers [headPos + k*ChunkSize, headPos + (k+1)*ChunkSize).
//
// Within a segment batches are back to back; between segments lies padding
// (WriteBuffer.Skip), which is not data. Offsets are dense, so batch i+1's
// base is batch i's last + 1. The index is cut into groups of consecutive
// batches with no padding between them, so within a group batch i+1 starts
// where batch i ends, and padding can only lie between two groups (where the
// next group's start is past the previous group's end). Per batch the index
// keeps only its last offset and its end position, as uint32 deltas from the
// group header: 8 bytes a batch, with no pointers for the GC to scan (a 4 GiB
// arena of 1 KiB batches: 32 MiB).

// chain is a deque of chunk ids, oldest first.
type chain struct {
	ids []uint32
	lo  int
}

func (c *chain) len() int           { return len(c.ids) - c.lo }
func (c *chain) at(i int64) uint32  { return c.ids[c.lo+int(i)] }
func (c *chain) front() uint32      { return c.ids[c.lo] }
func (c *chain) pushBack(id uint32) { c.ids = append(c.ids, id) }

func (c *chain) popBack() uint32 {
	id := c.ids[len(c.ids)-1]
	c.ids = c.ids[:len(c.ids)-1]
	if c.lo == len(c.ids) {
		c.ids, c.lo = c.ids[:0], 0
	}
	return id
}

func (c *chain) popFront() uint32 {
	id := c.ids[c.lo]
	c.lo++
	switch {
	case c.lo == len(c.ids) && cap(c.ids) > 256:
		c.ids, c.lo = nil, 0 // a buffer gone idle gives its large ring back
	case c.lo == len(c.ids):
		c.ids, c.lo = c.ids[:0], 0
	case c.lo >= 64 && 2*c.lo >= len(c.ids):
		c.ids = c.ids[:copy(c.ids, c.ids[c.lo:])]
		c.lo = 0
	}
	return id
}

// groupCap is the number of batches in one index group.
const groupCap = 256

// indexGroup indexes up to groupCap consecutive batches, back to back.
type indexGroup struct {
	base  int64    // offset of the group's first batch
	start int64    // stream position of the group's first batch
	data  int64    // batch bytes the buffer took before the group's first batch
	last  []uint32 // per batch: last offset - base
	end   []uint32 // per batch: end position - start
}

// endPos is the stream position where the group's last batch ends.
func (g *indexGroup) endPos() int64 { return g.start + int64(g.end[len(g.end)-1]) }

// batchIndex maps offsets to stream positions for the batches in memory.
// A batch is named by (g, j): groups[g], entry j.
type batchIndex struct {
	groups []*indexGroup
	g0     int        // first live group
	lo     int        // first live entry of groups[g0]
	pool   *sync.Pool // full-size groups, shared by the arena's buffers
}

func (x *batchIndex) empty() bool { return x.g0 == len(x.groups) }

// add indexes a batch appended at the end of the stream; data is the batch
// bytes the buffer took before it. A batch that does not start where the
// previous one ended (padding lies between them) starts a new group.
func (x *batchIndex) add(base, last, start, end, data int64) {
	var g *indexGroup
	if !x.empty() {
		g = x.groups[len(x.groups)-1]
	}
	if g == nil || len(g.last) == groupCap || last-g.base > math.MaxUint32 || end-g.start > math.MaxUint32 ||
		start != g.endPos() {
		g = x.newGroup(base, start, data, g == nil)
	}
	g.last = append(g.last, uint32(last-g.base))
	g.end = append(g.end, uint32(end-g.start))
}

// newGroup starts a group. The first group of an empty index starts small
// and grows, so a quiet buffer costs little; a busy one reuses full-size
// groups that other buffers dropped, so steady appends do not allocate.
func (x *batchIndex) newGroup(base, start, data int64, first bool) *indexGroup {
	var g *indexGroup
	if !first {
		g, _ = x.pool.Get().(*indexGroup)
	}
	if g == nil {
		g = &indexGroup{}
		if !first {
			g.last, g.end = make([]uint32, 0, groupCap), make([]uint32, 0, groupCap)
		}
	}
	g.base, g.start, g.data = base, start, data
	g.last, g.end = g.last[:0], g.end[:0]
	x.groups = append(x.groups, g)
	return g
}

// batch returns batch (g, j)'s offsets and stream positions.
func (x *batchIndex) batch(g, j int) (base, last, start, end int64) {
	gr := x.groups[g]
	base, start = gr.base, gr.start
	if j > 0 {
		base += int64(gr.last[j-1]) + 1
		start += int64(gr.end[j-1])
	}
	return base, gr.base + int64(gr.last[j]), start, gr.start + int64(gr.end[j])
}

// first returns the first live batch; the index must not be empty.
func (x *batchIndex) first() (g, j int) { return x.g0, x.lo }

// find returns the first live batch whose last offset is at least off.
func (x *batchIndex) find(off int64) (g, j int, ok bool) {
	lo, hi := x.g0, len(x.groups)
	for lo < hi { // first group whose final last offset >= off
		m := int(uint(lo+hi) >> 1)
		gr := x.groups[m]
		if gr.base+int64(gr.last[len(gr.last)-1]) >= off {
			hi = m
		} else {
			lo = m + 1
		}
	}
	if lo == len(x.groups) {
		return 0, 0, false
	}
	g, gr := lo, x.groups[lo]
	lo, hi = 0, len(gr.last)-1
	if g == x.g0 {
		lo = x.lo
	}
	for lo < hi { // first entry with last offset >= off
		m := int(uint(lo+hi) >> 1)
		if gr.base+int64(gr.last[m]) >= off {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return g, lo, true
}

// lastWithin returns the last entry of group g from entry j on that ends at
// or before stream position limit; entry j must.
func (x *batchIndex) lastWithin(g, j int, limit int64) int {
	gr := x.groups[g]
	lo, hi := j, len(gr.end)-1
	for lo < hi {
		m := int(uint(lo+hi+1) >> 1)
		if gr.start+int64(gr.end[m]) <= limit {
			lo = m
		} else {
			hi = m - 1
		}
	}
	return lo
}

// startOf returns the stream position where the live batch holding offset
// off starts (the first live batch, if off is older), and the batch bytes the
// buffer took before it. ok is false if no live batch ends at or past off.
func (x *batchIndex) startOf(off int64) (pos, data int64, ok bool) {
	if x.empty() {
		return 0, 0, false
	}
	g, j, ok := x.find(off)
	if !ok {
		return 0, 0, false
	}
	_, _, pos, _ = x.batch(g, j)
	return pos, x.groups[g].data + pos - x.groups[g].start, true
}

// holds reports whether every byte of the stream range [from, to), from <
// to, lies in a live batch: none is older than the first live batch, past
// the last, or padding between two groups.
func (x *batchIndex) holds(from, to int64) bool {
	if x.empty() {
		return false
	}
	if _, _, first, _ := x.batch(x.g0, x.lo); from < first {
		return false
	}
	lo, hi := x.g0, len(x.groups)
	for lo < hi { // first group starting past from
		m := int(uint(lo+hi) >> 1)
		if x.groups[m].start > from {
			hi = m
		} else {
			lo = m + 1
		}
	}
	g := lo - 1 // >= g0: the first live batch starts at or before from
	for end := x.groups[g].endPos(); end < to; end = x.groups[g].endPos() {
		if g+1 == len(x.groups) || x.groups[g+1].start != end {
			return false // past the tail, or padding
		}
		g++
	}
	return true
}

// dataEnd returns the end of the last live batch; the index must not be
// empty.
func (x *batchIndex) dataEnd() int64 { return x.groups[len(x.groups)-1].endPos() }

// dropBefore drops every batch that starts before pos: its first bytes were
// in a reclaimed chunk.
func (x *batchIndex) dropBefore(pos int64) {
	for !x.empty() {
		if _, _, start, _ := x.batch(x.g0, x.lo); start >= pos {
			return
		}
		x.lo++
		if x.lo == len(x.groups[x.g0].last) {
			x.dropFirstGroup()
		}
	}
}

func (x *batchIndex) dropFirstGroup() {
	if g := x.groups[x.g0]; cap(g.last) == groupCap {
		x.pool.Put(g)
	}
	x.groups[x.g0] = nil
	x.g0++
	x.lo = 0
	switch {
	case x.g0 == len(x.groups):
		x.groups, x.g0 = x.groups[:0], 0
	case x.g0 >= 16 && 2*x.g0 >= len(x.groups):
		n := copy(x.groups, x.groups[x.g0:])
		clear(x.groups[n:])
		x.groups, x.g0 = x.groups[:n], 0
	}
}

// reset drops everything.
func (x *batchIndex) reset() { *x = batchIndex{pool: x.pool} }
