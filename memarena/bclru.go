package memarena

// The LRU list of BlockCache and its reclaimer's side: the least recently
// used block goes first, whatever its file.

func (c *BlockCache) state() *ownerState { return &c.st }
func (c *BlockCache) tryLock() bool      { return c.mu.TryLock() }
func (c *BlockCache) unlock()            { c.mu.Unlock() }

func (c *BlockCache) candidateLocked(bool) (uint64, candidate) {
	if c.mu.closed || c.mu.lru < 0 {
		return 0, candNone
	}
	return c.a.meta(c.mu.entries[c.mu.lru].chunk).stamp, candReady
}

func (c *BlockCache) reclaimOneLocked() bool { return c.removeLocked(c.mu.lru) }

// evictLocked drops the least recently used block to stay under the cap.
func (c *BlockCache) evictLocked() {
	c.removeLocked(c.mu.lru)
	c.a.c.reclaimed.Add(c.a.chunkSize)
}

// insertLocked adds a block held in chunk id as the most recently used.
func (c *BlockCache) insertLocked(key blockKey, id uint32, n int32) {
	var i int32
	if k := len(c.mu.free); k > 0 {
		i, c.mu.free = c.mu.free[k-1], c.mu.free[:k-1]
	} else {
		i = int32(len(c.mu.entries))
		c.mu.entries = append(c.mu.entries, cacheEntry{})
	}
	c.mu.entries[i] = cacheEntry{key: key, chunk: id, n: n}
	c.linkLocked(i)
	c.mu.index[key] = i
	c.mu.bytes += c.a.chunkSize
	c.a.c.blockCacheBytes.Add(c.a.chunkSize)
	c.a.meta(id).stamp = c.a.clock()
	c.a.enqueueLocked(c)
}

// removeLocked drops entry i and reports whether its chunk was freed.
func (c *BlockCache) removeLocked(i int32) bool {
	e := &c.mu.entries[i]
	c.unlinkLocked(i)
	delete(c.mu.index, e.key)
	c.mu.free = append(c.mu.free, i)
	c.mu.bytes -= c.a.chunkSize
	c.a.c.blockCacheBytes.Add(-c.a.chunkSize)
	return c.a.unref(e.chunk)
}

// touchLocked makes entry i the most recently used.
func (c *BlockCache) touchLocked(i int32) {
	c.a.meta(c.mu.entries[i].chunk).stamp = c.a.clock()
	if c.mu.mru == i {
		return
	}
	c.unlinkLocked(i)
	c.linkLocked(i)
}

// linkLocked puts entry i at the most recently used end.
func (c *BlockCache) linkLocked(i int32) {
	e := &c.mu.entries[i]
	e.prev, e.next = c.mu.mru, -1
	if c.mu.mru >= 0 {
		c.mu.entries[c.mu.mru].next = i
	} else {
		c.mu.lru = i
	}
	c.mu.mru = i
}

func (c *BlockCache) unlinkLocked(i int32) {
	e := &c.mu.entries[i]
	if e.prev >= 0 {
		c.mu.entries[e.prev].next = e.next
	} else {
		c.mu.lru = e.next
	}
	if e.next >= 0 {
		c.mu.entries[e.next].prev = e.prev
	} else {
		c.mu.mru = e.prev
	}
	e.prev, e.next = -1, -1
}
