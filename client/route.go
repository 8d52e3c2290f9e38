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
//
// Keyless records (no key, no logical id) go to one partition, the sticky one, until the
// batch they started there closes, for any reason (full, lingered, flushed, sent by a
// synchronous produce); the next keyless record then goes to the next partition, round
// robin. Why this one: a batch per partition is what makes produce cheap (one request,
// one append, one fetch per batch), and spreading keyless records over every partition
// at once (round robin per record) would cut every batch into P small ones, each waiting
// its own linger. Moving on when the batch closes (not only when it fills, which at a low
// rate takes longer than any consumer should wait) keeps each partition's batches as
// large as the rate allows, and round robin gives every partition its turn within P
// batches, so none starves. (Kafka's uniform sticky partitioner, KIP-794, also steers
// away from partitions whose broker is slow; sluice's sender drains every ready
// partition of a broker at once, so there is no queue per partition to compare yet.)
type router struct {
	p      int
	sticky int // partition of keyless records without a logical id
	// stickyOrd is the ord the sticky partition's next sealed batch will get, as seen when
	// it became sticky or got its last keyless record: a seal since moves keyless records on.
	stickyOrd uint64
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

// follow moves keyless records on when the sticky partition's batch closed since they
// last went there (nextOrd is that partition's window's next ord: a seal anywhere, by the
// sender's linger or a flush too, raises it), and notes the ord of the new sticky one.
// The producer calls it before routing each keyless record.
func (rt *router) follow(nextOrd func(part int) uint64) {
	if ord := nextOrd(rt.sticky); ord != rt.stickyOrd {
		if rt.stickyOrd != 0 {
			rt.sticky = (rt.sticky + 1) % rt.p
		}
		rt.stickyOrd = nextOrd(rt.sticky)
	}
}

// keyless reports whether r is routed by the sticky partition.
func keyless(r *Record) bool { return !r.UseLogical && len(r.Key) == 0 }
