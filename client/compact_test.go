package client

import (
	"testing"

	"sluice/batch"
)

// TestCompactionKeepsTwice: a compacted batch holds at most twice its bytes even when
// the pool's class for it holds a larger buffer (a class keeps buffers of up to twice
// its size): here a buffer a Builder grew past the 512 KiB class's size, released into
// that class, must not be handed to a 307 KB batch. Found by review: with
// slices.Grow's overshoot the buffer was 647 168 bytes and the batch kept it.
func TestCompactionKeepsTwice(t *testing.T) {
	sh, w := mibWindow(batch.CodecNone)
	sh.pinLimit, sh.compactAt = 1<<40, 1<<40 // compaction only when the test asks
	kib := make([]byte, 1024)

	// A 400 KiB batch begun in a 256 KiB buffer (lastLen, which decays by an eighth a
	// batch after bigger ones): the Builder grows it to 647 168 bytes. Released, that
	// buffer goes back to the 512 KiB class.
	w.lastLen = 200 << 10
	w.release(sealValues(w, repeat(kib, 400)...))

	// A 300 KiB batch begun in a 1 MiB buffer (lastLen after a big batch): over twice its
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
