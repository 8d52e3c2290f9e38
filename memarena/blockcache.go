package memarena

import (
	"fmt"
	"sync"
)

// BlockCache caches blocks of files (segment files, later HDFS files), one
// block per chunk, keyed by file and block number. Blocks are copies of
// durable data, so the reclaimer may take any of them, least recently used
// first. All methods are safe for concurrent use.
type BlockCache struct {
	a   *Arena
	st  ownerState
	max int64

	mu struct {
		sync.Mutex
		closed  bool
		index   map[blockKey]int32 // -> entries index
		entries []cacheEntry
		free    []int32 // unused entries
		lru     int32   // least recently used entry, -1 if none
		mru     int32   // most recently used entry, -1 if none
		bytes   int64
		hits    uint64
		misses  uint64
	}
}

type blockKey struct {
	file  uint64
	block int64
}

// cacheEntry is one cached block, in a doubly linked LRU list by index.
type cacheEntry struct {
	key        blockKey
	chunk      uint32
	n          int32 // bytes of the block
	prev, next int32 // toward lru, toward mru; -1 at the ends
}

// BlockCacheStats describes one block cache.
type BlockCacheStats struct {
	Bytes        int64 // chunk bytes held
	Blocks       int
	Hits, Misses uint64
}

// NewBlockCache returns an empty cache of at most maxBytes (0: the arena's
// size). Blocks may be up to ChunkSize long; use ChunkSize as the block size.
func (a *Arena) NewBlockCache(maxBytes int64) (*BlockCache, error) {
	if a.closed.Load() {
		return nil, ErrClosed
	}
	if maxBytes == 0 {
		maxBytes = a.cfg.Size
	}
	if maxBytes < a.chunkSize {
		return nil, fmt.Errorf("cannot create block cache of %s, below a chunk: %w", FormatSize(maxBytes), ErrInvalid)
	}
	c := &BlockCache{a: a, max: maxBytes}
	c.st.id = a.newOwnerID()
	c.mu.index = make(map[blockKey]int32)
	c.mu.lru, c.mu.mru = -1, -1
	a.c.blockCaches.Add(1)
	return c, nil
}

// Get returns a held span of the block, or false if it is not cached.
func (c *BlockCache) Get(fileID uint64, block int64) (Span, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.mu.index[blockKey{fileID, block}]
	if !ok || c.mu.closed {
		c.mu.misses++
		c.a.c.cacheMisses.Add(1)
		return Span{}, false
	}
	c.mu.hits++
	c.a.c.cacheHits.Add(1)
	c.touchLocked(i)
	e := &c.mu.entries[i]
	return c.a.holdSpan(e.chunk, 0, int64(e.n)), true
}

// Put copies data, at most ChunkSize bytes, into the cache as the block. A
// block already cached is left as it is (blocks of a file do not change;
// Invalidate a file that does). It fails with ErrFull when nothing can be
// reclaimed.
func (c *BlockCache) Put(fileID uint64, block int64, data []byte) error {
	if int64(len(data)) > c.a.chunkSize {
		return fmt.Errorf("cannot cache block of %d bytes over a chunk: %w", len(data), ErrTooLarge)
	}
	key := blockKey{fileID, block}
	if c.cached(key) {
		return nil
	}
	// Allocate and copy without the lock: the reclaimer may want to take a
	// block of this very cache to make room.
	id, err := c.a.alloc(nil, c.st.id)
	if err != nil {
		return err
	}
	copy(c.a.chunkData(id), data)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.mu.index[key]; ok || c.mu.closed {
		c.a.unref(id) // lost a race with another Put, or closed meanwhile
		return nil
	}
	c.insertLocked(key, id, int32(len(data)))
	for c.mu.bytes > c.max {
		c.evictLocked()
	}
	return nil
}

func (c *BlockCache) cached(key blockKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.mu.index[key]
	return ok
}

// Invalidate drops every cached block of the file (spans still held stay
// valid until released). It walks the whole cache.
func (c *BlockCache) Invalidate(fileID uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := c.mu.lru; i >= 0; {
		e := &c.mu.entries[i]
		next := e.next
		if e.key.file == fileID {
			c.removeLocked(i)
		}
		i = next
	}
}

// Close drops every block; later Puts are ignored and Gets miss.
func (c *BlockCache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return
	}
	for c.mu.lru >= 0 {
		c.removeLocked(c.mu.lru)
	}
	c.mu.closed = true
	c.a.c.blockCaches.Add(-1)
}

// Stats describes the cache.
func (c *BlockCache) Stats() BlockCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return BlockCacheStats{Bytes: c.mu.bytes, Blocks: len(c.mu.index), Hits: c.mu.hits, Misses: c.mu.misses}
}
