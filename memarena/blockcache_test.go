package memarena

import (
	"bytes"
	"errors"
	"testing"
)

func newBC(t testing.TB, a *Arena, max int64) *BlockCache {
	t.Helper()
	c, err := a.NewBlockCache(max)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func mustPut(t testing.TB, c *BlockCache, file uint64, block int64, data []byte) {
	t.Helper()
	if err := c.Put(file, block, data); err != nil {
		t.Fatalf("Put(%d, %d): %v", file, block, err)
	}
}

// checkGet checks that the block is cached with the given data (nil: not).
func checkGet(t *testing.T, c *BlockCache, file uint64, block int64, want []byte) {
	t.Helper()
	s, ok := c.Get(file, block)
	switch {
	case want == nil && ok:
		t.Fatalf("Get(%d, %d) hit; want a miss", file, block)
	case want != nil && !ok:
		t.Fatalf("Get(%d, %d) missed", file, block)
	case ok && !bytes.Equal(s.Bytes(), want):
		t.Fatalf("Get(%d, %d) returned other bytes", file, block)
	}
	if ok {
		s.Release()
	}
}

func TestBlockCachePutGet(t *testing.T) {
	a := newTestArena(t, smallConfig(16))
	c := newBC(t, a, 0)
	mustPut(t, c, 1, 0, pattern(4096, 10))
	mustPut(t, c, 1, 1, pattern(100, 11))
	mustPut(t, c, 2, 0, pattern(4096, 20))
	mustPut(t, c, 1, 0, pattern(4096, 99)) // already cached: kept as is
	checkGet(t, c, 1, 0, pattern(4096, 10))
	checkGet(t, c, 1, 1, pattern(100, 11))
	checkGet(t, c, 2, 0, pattern(4096, 20))
	checkGet(t, c, 2, 1, nil)
	if err := c.Put(3, 0, make([]byte, 4097)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Put over a chunk: %v", err)
	}
	c.Invalidate(1)
	checkGet(t, c, 1, 0, nil)
	checkGet(t, c, 1, 1, nil)
	checkGet(t, c, 2, 0, pattern(4096, 20))
	st := c.Stats()
	if st.Blocks != 1 || st.Bytes != 4096 || st.Hits != 4 || st.Misses != 3 {
		t.Fatalf("stats %+v", st)
	}
	as := a.Stats()
	if as.BlockCacheBytes != 4096 || as.CacheHits != 4 || as.CacheMisses != 3 || as.CacheHitRatio() != 4.0/7 {
		t.Fatalf("arena stats %+v", as)
	}
}

func TestBlockCacheEvictsLRUUnderItsCap(t *testing.T) {
	a := newTestArena(t, smallConfig(16))
	c := newBC(t, a, 3*4096)
	for b := range int64(3) {
		mustPut(t, c, 1, b, pattern(10, uint64(b)))
	}
	checkGet(t, c, 1, 0, pattern(10, 0)) // 1 is now the least recently used
	mustPut(t, c, 1, 3, pattern(10, 3))
	checkGet(t, c, 1, 1, nil)
	checkGet(t, c, 1, 0, pattern(10, 0))
	checkGet(t, c, 1, 2, pattern(10, 2))
	checkGet(t, c, 1, 3, pattern(10, 3))
}

func TestBlockCacheGivesWayToWriteBuffers(t *testing.T) {
	cfg := smallConfig(16)
	cfg.LowWatermark, cfg.HighWatermark = 0, 0.01 // reclaim only when full
	a := newTestArena(t, cfg)
	c := newBC(t, a, 0)
	for b := range int64(16) {
		mustPut(t, c, 1, b, pattern(4096, uint64(b)))
	}
	if a.Stats().FreeBytes != 0 {
		t.Fatal("cache did not fill the arena")
	}
	held, _ := c.Get(1, 0) // read: survives; held: not reused
	w := newWB(t, a, 0)
	mustAppend(t, w, make([]byte, 10*4096), 0, 0)
	if st := c.Stats(); st.Blocks > 6 {
		t.Fatalf("cache kept %d blocks", st.Blocks)
	}
	checkGet(t, c, 1, 0, pattern(4096, 0))
	if !bytes.Equal(held.Bytes(), pattern(4096, 0)) {
		t.Fatal("held block changed")
	}
	held.Release()
	mustPut(t, c, 9, 9, []byte("x")) // the cache can still get memory back
	checkGet(t, c, 9, 9, []byte("x"))
}

func TestBlockCacheClose(t *testing.T) {
	a := newTestArena(t, smallConfig(4))
	c := newBC(t, a, 0)
	mustPut(t, c, 1, 0, []byte("abc"))
	held, _ := c.Get(1, 0)
	c.Close()
	checkGet(t, c, 1, 0, nil)
	mustPut(t, c, 1, 1, []byte("abc")) // ignored
	if st := c.Stats(); st.Blocks != 0 {
		t.Fatalf("closed cache holds %d blocks", st.Blocks)
	}
	if string(held.Bytes()) != "abc" {
		t.Fatal("held block changed")
	}
	held.Release()
	if st := a.Stats(); st.UsedBytes != 0 || st.BlockCaches != 0 {
		t.Fatalf("stats %+v", st)
	}
}
