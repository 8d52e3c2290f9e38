package client

import (
	"math"

	"sluice/wire"
)

// layoutView is what a consumer knows of a topic's partition layouts (topic_layouts,
// docs/cluster.md "Expansion") and the logical range [lo, hi] it reads. Partition j's
// log is a run of segments, one per layout k that has j: the records of segment k were
// routed by layout k. A segment starts at j's switch offset to k (0 for j's first layout)
// and ends where j's next segment starts. Within a logical id, every record of layout k-1
// was produced before any of layout k, so the consumer delivers segment k of j only once
// it has read, up to their switch offsets to k, every partition i whose range in layout
// k-1 shares a logical id (of [lo, hi]) with j's range in layout k: the gate of the
// segment. Pure logic: no I/O, no clock.
type layoutView struct {
	ls     []wire.Layout
	lo, hi int
}

// last returns the current layout.
func (v *layoutView) last() wire.Layout { return v.ls[len(v.ls)-1] }

// first returns the index of the first layout that has partition j (len(v.ls) when none).
func (v *layoutView) first(j int) int {
	for k, l := range v.ls {
		if j < int(l.Partitions) {
			return k
		}
	}
	return len(v.ls)
}

// meets reports whether partition j's range in layout k shares a logical id with [lo, hi].
func (v *layoutView) meets(j, k int) bool {
	lo, hi := wire.LogicalRange(j, int(v.ls[k].Partitions))
	return lo <= v.hi && hi > v.lo
}

// reads reports whether the consumer reads partition j: some layout gives it part of
// [lo, hi].
func (v *layoutView) reads(j int) bool {
	for k := v.first(j); k < len(v.ls); k++ {
		if v.meets(j, k) {
			return true
		}
	}
	return false
}

// start returns the offset partition j's segment of layout k starts at, -1 while
// unknown (j has not switched to k yet, as far as the view knows).
func (v *layoutView) start(j, k int) int64 {
	if k == v.first(j) {
		return 0
	}
	return v.ls[k].Switches[j]
}

// segment returns the layout k whose segment of partition j holds offset x, and where
// that segment ends (math.MaxInt64 when it is the last one or its end is not known yet).
func (v *layoutView) segment(j int, x int64) (k int, end int64) {
	k = v.first(j)
	for k+1 < len(v.ls) {
		s := v.start(j, k+1)
		if s < 0 {
			return k, math.MaxInt64
		}
		if x < s {
			return k, s
		}
		k++
	}
	return k, math.MaxInt64
}

// gateOpen reports whether the records of partition j's segment k may be delivered:
// every record of an earlier layout with a logical id that j's segment may hold (one of
// [lo, hi]) was delivered. That holds when, for every partition i of layout k-1 whose
// range there shares such an id, i switched to k, pos(i) (the next offset the consumer
// delivers of i) is at or past that switch, and i's own segment k-1 was open for those
// ids, recursively: a segment with no records is passed without its gate being looked at
// (pos(i) is at its end from the start), so its gate is checked here. Segments of the
// first layout have no gate. Gates only open: positions only grow and switches, once
// recorded, never change.
func (v *layoutView) gateOpen(j, k int, pos func(i int) int64) bool {
	return v.gateOpenIn(j, k, v.lo, v.hi, pos)
}

// gateOpenIn is gateOpen for the logical ids [lo, hi] only.
func (v *layoutView) gateOpenIn(j, k, lo, hi int, pos func(i int) int64) bool {
	if k == 0 {
		return true
	}
	jlo, jhi := wire.LogicalRange(j, int(v.ls[k].Partitions))
	lo, hi = max(jlo, lo), min(jhi-1, hi)
	if lo > hi {
		return true // none of j's ids of layout k is wanted
	}
	prev := int(v.ls[k-1].Partitions)
	for i := wire.PartitionOf(uint16(lo), prev); i <= wire.PartitionOf(uint16(hi), prev); i++ {
		s := v.ls[k].Switches[i]
		if s < 0 || pos(i) < s || !v.gateOpenIn(i, k-1, lo, hi, pos) {
			return false
		}
	}
	return true
}

// bound returns how far the consumer may deliver partition j from offset x: records
// below limit (x itself when the gate of x's segment is closed), of batches whose layout
// stamp is not newer than stamp (a newer one means the view is out of date: an expansion
// it has not read).
func (v *layoutView) bound(j int, x int64, pos func(i int) int64) (limit int64, stamp uint16) {
	k, end := v.segment(j, x)
	if !v.gateOpen(j, k, pos) {
		return x, uint16(v.ls[k].Version)
	}
	return end, uint16(v.ls[k].Version)
}

// complete reports whether every partition's switch to every layout is known.
func (v *layoutView) complete() bool {
	for _, l := range v.ls {
		for _, s := range l.Switches {
			if s < 0 {
				return false
			}
		}
	}
	return true
}
