package client

import "sluice/wire"

// LogicalOf returns the logical partition (0..65535) of a key: the 32-bit FNV-1a hash
// of the key folded to 16 bits. Every client routes a key this way, so records with the
// same key go to the same logical partition, hence to the same physical one.
func LogicalOf(key []byte) uint16 {
	const offset32, prime32 = 2166136261, 16777619
	h := uint32(offset32)
	for _, c := range key {
		h ^= uint32(c)
		h *= prime32
	}
	return uint16(h ^ h>>16)
}

// router maps records to physical partitions of a topic with p partitions.
type router struct {
	p      int
	sticky int // partition of keyless records without a logical id
}

// route returns the logical id and the physical partition of r.
func (rt *router) route(r *Record) (logical uint16, part int) {
	switch {
	case r.UseLogical:
		logical = r.Logical
	case len(r.Key) > 0:
		logical = LogicalOf(r.Key)
	default:
		lo, _ := wire.LogicalRange(rt.sticky, rt.p)
		return uint16(lo), rt.sticky
	}
	return logical, wire.PartitionOf(logical, rt.p)
}

// sealed moves keyless records on to the next partition once the sticky partition
// sealed a batch, so that keyless load spreads over partitions batch by batch.
func (rt *router) sealed(part int) {
	if part == rt.sticky {
		rt.sticky = (rt.sticky + 1) % rt.p
	}
}
