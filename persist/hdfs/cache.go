package hdfs

import "sluice/memarena"

// ArenaCache is the arena's block cache as a reader's Cache: HDFS blocks share the
// arena's budget with the write buffers, and its reclaimer takes them least recently
// used first (they are copies of data HDFS holds).
type ArenaCache struct {
	Blocks *memarena.BlockCache
	Size   int // block size: the arena's chunk size
}

// BlockSize returns the cache's block size.
func (c ArenaCache) BlockSize() int { return c.Size }

// Get copies a cached block into dst.
func (c ArenaCache) Get(file uint64, block int64, dst []byte) (int, bool) {
	sp, ok := c.Blocks.Get(file, block)
	if !ok {
		return 0, false
	}
	n := copy(dst, sp.Bytes())
	sp.Release()
	return n, true
}

// Put caches a copy of a block; a full arena declines it.
func (c ArenaCache) Put(file uint64, block int64, data []byte) { _ = c.Blocks.Put(file, block, data) }
