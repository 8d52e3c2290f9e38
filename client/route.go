package client

import "sluice/wire"

// LogicalOf returns the logical partition (0..65535) of a key: the top 16 bits of the
// 64-bit FNV-1a hash of the key passed through murmur3's 64-bit finalizer (fmix64), which
// mixes every input bit into the top ones. The physical partition serving a logical id is
// chosen by its high bits (wire.PartitionOf), so they must vary with every byte of the
// key. Every client routes a key this way (docs/protocol.md §8), so records with the same
// key go to the same logical partition, hence to the same physical one.
func LogicalOf(key []byte) uint16 {
	const offset64, prime64 = 14695981039346656037, 1099511628211
	h := uint64(offset64)
	for _, c := range key {
		h ^= uint64(c)
		h *= prime64
	}
	return uint16(fmix64(h) >> 48)
}

// fmix64 is the finalizer of MurmurHash3: each bit of the result depends on every bit of
// h.
func fmix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
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
