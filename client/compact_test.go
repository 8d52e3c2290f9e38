package client

import (
	"testing"

	"sluice/batch"
)

// TestCompactionKeepsTwice: a compacted batch holds at most twice its bytes. Found by
// review: a Builder that grew with slices.Grow overshot a 256 KiB buffer to 647 168
// bytes, which went back into the 512 KiB class and was handed to a 307 KB batch. With
// exact doubling this sequence gives a 512 KiB buffer; TestPinnedModel covers the
// compaction's own check against a class's larger buffers.
func TestCompactionKeepsTwice(t *testing.T) {
	sh, w := mibWindow(batch.CodecNone)
	sh.pinLimit, sh.compactAt = 1<<40, 1<<40 // compaction only when the test asks
	kib := make([]byte, 1024)

	// A 400 KiB batch begun in a 256 KiB buffer (built in twice lastLen): the Builder
	// grows it. Released, that buffer goes back to the 512 KiB class.
	w.lastLen = 100 << 10
	w.release(sealValues(w, repeat(kib, 400)...))

	// A 300 KiB batch begun in the largest buffer (twice lastLen, capped): over twice its
	// size, so the compaction copies it.
	w.lastLen = 700 << 10
	for range 300 {
		w.add(&Record{Value: kib}, 0, 1, 0)
	}
	w.seal()
	held := w.q[0]
	before, heldCap := sh.pinned, cap(held.buf)
	sh.compact(w)
	t.Logf("batch of %d bytes: buffer %d -> %d; pinned %d -> %d", len(held.buf), heldCap, cap(held.buf), before, sh.pinned)
	if cap(held.buf) > 2*len(held.buf) {
		t.Errorf("after compaction a batch of %d bytes holds a buffer of %d, over twice its size", len(held.buf), cap(held.buf))
	}
}
