package client

// batchBufs recycles the producer's batch buffers in size classes.
//
// A sealed batch is held until a checkpoint covers it (it may have to be sent again), so
// under a steady load the producer holds as many batches as a checkpoint interval
// produces, and gives them back in bursts. Batch buffers used to be of one size, the
// batch size and an eighth (the largest a batch can grow to), 16 of them recycled: a
// linger of 200 µs at 280 000 records/s of 1 KiB seals batches of about 57 KiB, so each
// held batch pinned 1.1 MiB, twenty times its bytes, the producer's memory was several
// times its MaxBufferedBytes (which counts batch bytes), and every burst of releases
// beyond 16 went to the garbage collector, to be allocated again (about 100 MB/s in
// that run, 97 % of the harness's allocation).
//
// Now a window builds a batch in a buffer sized from its recent batches (window.seal: a
// batch that outgrows it doubles it, batch.Builder's grow), a sealed batch stays in its
// build buffer, and once the held buffers pass twice MaxBufferedBytes every held batch
// that fills less than half of its buffer is copied into one of its size (window.compact:
// the big one goes back to be built in again), and buffers are recycled in classes of
// powers of two from minBatchBuf up, the last class the largest batch. Free buffers are
// bounded by their capacity in bytes (limit), not by their number, so that a burst of
// small ones is kept whole. After a compaction a held batch keeps a buffer of at most
// twice its bytes, or minBatchBuf.
//
// The producer's lock guards it (it is part of winShared).
type batchBufs struct {
	sizes []int      // capacity of each class, ascending; the last is the largest batch
	free  [][][]byte // free buffers per class
	bytes int64      // capacity of the free buffers
	limit int64      // bound of bytes
}

// minBatchBuf is the smallest class. It was 16 KiB, and a held batch of one 1 KiB record
// then pinned 16 KiB while it counted 1 KiB against MaxBufferedBytes (which counts batch
// bytes): a producer of small batches whose checkpoint lagged (an HDFS outage, a slow
// disk) held 16 times its bound, more with smaller records. With classes down to 256
// bytes a compacted batch pins at most twice its bytes (window.compact copies one that
// fills less than half of its buffer into one of its size), or 256 bytes, so the bound
// holds within twice; the extra classes cost get and put a few more comparisons.
const minBatchBuf = 256

// init sets the classes up for batches of at most maxCap bytes, keeping at most limit
// bytes of free buffers (never less than two of the largest).
func (p *batchBufs) init(maxCap int, limit int64) {
	p.sizes = p.sizes[:0]
	for s := minBatchBuf; s < maxCap; s *= 2 {
		p.sizes = append(p.sizes, s)
	}
	p.sizes = append(p.sizes, maxCap)
	p.free = make([][][]byte, len(p.sizes))
	p.limit = max(limit, 2*int64(maxCap))
}

// get returns an empty buffer of at least hint bytes of capacity (capped at the largest
// class).
func (p *batchBufs) get(hint int) []byte {
	c := len(p.sizes) - 1
	for i, s := range p.sizes {
		if s >= hint {
			c = i
			break
		}
	}
	if n := len(p.free[c]); n > 0 {
		b := p.free[c][n-1]
		p.free[c][n-1] = nil
		p.free[c] = p.free[c][:n-1]
		p.bytes -= int64(cap(b))
		return b[:0]
	}
	return make([]byte, 0, p.sizes[c])
}

// put keeps b for a later get, in the largest class it covers, unless the free buffers
// are at their bound, b is below the smallest class, or it grew past twice the largest
// (a batch with one record larger than the batch size).
func (p *batchBufs) put(b []byte) {
	n := cap(b)
	if n < p.sizes[0] || n > 2*p.sizes[len(p.sizes)-1] || p.bytes+int64(n) > p.limit {
		return
	}
	c := 0
	for i, s := range p.sizes {
		if s <= n {
			c = i
		}
	}
	p.free[c] = append(p.free[c], b)
	p.bytes += int64(n)
}
