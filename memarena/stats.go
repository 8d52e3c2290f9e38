package memarena

// Stats is a snapshot of the arena's figures, for metrics. Fields are read
// one by one, so sums can be off by a concurrent change.
type Stats struct {
	Size      int64 // the budget
	ChunkSize int64

	MappedBytes     int64 // slabs mapped so far (mmap is lazy)
	AdvisedBytes    int64 // of those, given back with MADV_DONTNEED and unused since
	PrefaultedBytes int64 // faulted in by Config.Prefault so far
	UsedBytes       int64 // chunks referenced by an owner or a span
	FreeBytes       int64 // Size - UsedBytes, mapped or not

	WriteBufferBytes int64 // chunks held by write buffers
	BlockCacheBytes  int64 // chunks held by block caches
	// OtherBytes is UsedBytes less the owners' chunks: spans from Alloc, and
	// reclaimed chunks that readers still hold.
	OtherBytes int64

	PendingBytes   int64 // batch bytes past their partition's checkpoint
	ReclaimedBytes int64 // taken from owners to make room, ever

	WriteBuffers, BlockCaches int64  // open owners
	ReclaimPasses             uint64 // reclaim passes run
	SlabsAdvised              uint64 // MADV_DONTNEED calls that gave a slab back
	FullErrors                uint64 // allocations refused with ErrFull
	BadReleases               uint64 // double or stale span releases ignored

	ReadHits, ReadMisses   uint64 // WriteBuffer.Read served / missed
	CacheHits, CacheMisses uint64 // BlockCache.Get served / missed
}

// Stats returns the arena's figures.
func (a *Arena) Stats() Stats {
	c := &a.c
	s := Stats{
		Size:             a.cfg.Size,
		ChunkSize:        a.chunkSize,
		AdvisedBytes:     c.advisedBytes.Load(),
		PrefaultedBytes:  a.pf.bytes.Load(),
		UsedBytes:        a.usedChunks() * a.chunkSize,
		WriteBufferBytes: c.writeBufferBytes.Load(),
		BlockCacheBytes:  c.blockCacheBytes.Load(),
		PendingBytes:     c.pending.Load(),
		ReclaimedBytes:   c.reclaimed.Load(),
		WriteBuffers:     c.writeBuffers.Load(),
		BlockCaches:      c.blockCaches.Load(),
		ReclaimPasses:    c.reclaimPasses.Load(),
		SlabsAdvised:     c.slabsAdvised.Load(),
		FullErrors:       c.fullErrors.Load(),
		BadReleases:      c.badReleases.Load(),
		ReadHits:         c.readHits.Load(),
		ReadMisses:       c.readMisses.Load(),
		CacheHits:        c.cacheHits.Load(),
		CacheMisses:      c.cacheMisses.Load(),
	}
	for i := range int(a.mapped.Load()) {
		s.MappedBytes += a.slabChunks(i) * a.chunkSize
	}
	s.FreeBytes = s.Size - s.UsedBytes
	s.OtherBytes = s.UsedBytes - s.WriteBufferBytes - s.BlockCacheBytes
	return s
}

// ReadHitRatio is ReadHits / (ReadHits + ReadMisses), or 1 with no reads.
func (s Stats) ReadHitRatio() float64 { return ratio(s.ReadHits, s.ReadMisses) }

// CacheHitRatio is CacheHits / (CacheHits + CacheMisses), or 1 with no gets.
func (s Stats) CacheHitRatio() float64 { return ratio(s.CacheHits, s.CacheMisses) }

func ratio(hits, misses uint64) float64 {
	if hits+misses == 0 {
		return 1
	}
	return float64(hits) / float64(hits+misses)
}

// newOwnerID returns a nonzero id for a new owner.
func (a *Arena) newOwnerID() uint32 {
	for {
		if id := a.ownerIDs.Add(1); id != 0 {
			return id
		}
	}
}
