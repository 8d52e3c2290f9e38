package engine

import (
	"errors"
	"testing"

	"sluice/memarena"
	"sluice/persist/local"
)

// TestFrozenMultiBatchIsSwitching: a frozen partition (Freeze, before Switch) answers a
// request of several batches ErrSwitching with the arena full, as it answers one batch:
// the hold is not taken for it (a review found it answered ErrFull, busy).
func TestFrozenMultiBatchIsSwitching(t *testing.T) {
	a := newArena(t, 1<<20, 64<<10)
	p := openPartition(t, t.TempDir(), a, local.Options{Sync: local.SyncGroup, SyncInterval: 1 << 62, SyncBytes: 1 << 40}, 1)
	defer p.Close()
	big := mkBatch(0, -1, 100, 1000)
	for {
		if _, err := p.Produce(1, 0, big, testNow); err != nil {
			if !errors.Is(err, memarena.ErrFull) {
				t.Fatal(err)
			}
			break
		}
	}
	p.Freeze()
	small := mkBatch(0, -1, 1, 10)
	if _, err := p.Produce(1, 0, small, testNow); !errors.Is(err, ErrSwitching) {
		t.Fatalf("one batch to a frozen partition: %v, want ErrSwitching", err)
	}
	two := append(append([]byte(nil), small...), big...)
	if _, err := p.Produce(1, 0, two, testNow); !errors.Is(err, ErrSwitching) {
		t.Fatalf("two batches to a frozen partition with the arena full: %v, want ErrSwitching", err)
	}
}

// TestHoldWithinPartitionMax: arena.partition_max 256 KiB, one small batch not yet
// durable; a request of 64 batches of ~1 KiB (a quarter of partition_max) is appended,
// as the same 64 batches one per request are. (The hold asked for 4 KiB of padding a
// batch, over partition_max, and the request was refused busy for as long as the
// partition had data not yet durable: a review.)
func TestHoldWithinPartitionMax(t *testing.T) {
	cfg := memarena.Config{Size: 16 << 20, ChunkSize: 64 << 10, PartitionMax: 256 << 10}
	cfg.EnsureDefaults()
	a, err := memarena.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	p := openPartition(t, t.TempDir(), a, local.Options{Sync: local.SyncGroup, SyncInterval: 1 << 62, SyncBytes: 1 << 40}, 1)
	defer p.Close()
	if _, err := p.Produce(1, 0, mkBatch(0, -1, 1, 10), testNow); err != nil {
		t.Fatal(err)
	}
	var req []byte
	one := mkBatch(0, -1, 1, 1000)
	for range 64 {
		req = append(req, one...)
	}
	_, errReq := p.Produce(1, 0, req, testNow)
	for i := range 64 {
		if _, err := p.Produce(1, 0, one, testNow); err != nil {
			t.Fatalf("batch %d alone: %v", i, err)
		}
	}
	if errReq != nil {
		t.Fatalf("a request of 64 KiB (partition_max 256 KiB) refused: %v; its 64 batches one by one were all appended", errReq)
	}
}
