package memarena

import (
	"errors"
	"testing"
)

// TestReserveHoldsRoom: a reservation's room survives a reclaim pass and another buffer
// taking every free chunk, so the Append it was made for cannot fail for want of
// memory; its unused chunks go back when it ends; and a reservation the arena cannot
// give fails with nothing held.
func TestReserveHoldsRoom(t *testing.T) {
	a := newTestArena(t, smallConfig(16)) // 16 chunks of 4 KiB
	w := newWB(t, a, 0)
	other := newWB(t, a, 0)
	mustAppend(t, w, pattern(1000, 1), 0, 0)
	w.SetDurable(0) // all of w durable: its one chunk would be reclaimable
	if err := w.Reserve(6000, 4095); err != nil {
		t.Fatal(err)
	}
	a.Reclaim()
	// The other buffer takes every chunk it can get (it may reclaim w's durable data,
	// never the reservation).
	for i := int64(0); ; i++ {
		if err := other.Append(pattern(4000, uint64(i)), i, i); err != nil {
			if !errors.Is(err, ErrFull) {
				t.Fatal(err)
			}
			break
		}
	}
	if err := w.Skip(4096); err != nil { // the padding a roll puts before a segment
		t.Fatal(err)
	}
	if err := w.Append(pattern(6000, 2), 1, 1); err != nil {
		t.Fatalf("append into reserved room: %v", err)
	}
	if got := w.Stats(); got.Bytes > 3*4*KiB {
		t.Fatalf("after the append the buffer holds %d bytes: the reservation's slack was kept", got.Bytes)
	}
	// A reservation the arena cannot give holds nothing more (it may give up the
	// buffer's own durable chunks on the way, as an Append would).
	before := a.Stats().WriteBufferBytes
	if err := w.Reserve(64*KiB, 0); !errors.Is(err, ErrFull) {
		t.Fatalf("reserve with the arena full: %v", err)
	}
	if after := a.Stats().WriteBufferBytes; after > before {
		t.Fatalf("a refused reservation grew the write buffers' memory from %d to %d", before, after)
	}
	// Unreserve gives the slack back.
	w.SetDurable(1)
	other.SetDurable(1 << 40)
	a.Reclaim()
	if err := w.Reserve(8*KiB, 0); err != nil {
		t.Fatal(err)
	}
	held := w.Stats().Bytes
	w.Unreserve()
	if got := w.Stats().Bytes; got >= held {
		t.Fatalf("Unreserve kept %d bytes of %d", got, held)
	}
}

// TestHoldKeepsRoomAcrossAppends: a Hold's room outlives the Appends made into it (a
// Reserve's ends at the next Append), so that the batches of one request all find
// their room once the first did; Unreserve leaves it held, and Release gives back what
// no Append reached. A Hold the arena cannot give holds nothing.
func TestHoldKeepsRoomAcrossAppends(t *testing.T) {
	a := newTestArena(t, smallConfig(16)) // 16 chunks of 4 KiB
	w := newWB(t, a, 0)
	other := newWB(t, a, 0)
	if err := w.Hold(3*6000, 3*4095); err != nil {
		t.Fatal(err)
	}
	// The other buffer takes every chunk left.
	for i := int64(0); ; i++ {
		if err := other.Append(pattern(4000, uint64(i)), i, i); err != nil {
			if !errors.Is(err, ErrFull) {
				t.Fatal(err)
			}
			break
		}
	}
	for i := range int64(3) {
		if err := w.Reserve(6000, 4095); err != nil {
			t.Fatalf("batch %d: reserve under the hold: %v", i, err)
		}
		w.Unreserve() // a store that refused the placement: the hold stays
		if err := w.Reserve(6000, 4095); err != nil {
			t.Fatalf("batch %d: reserve again under the hold: %v", i, err)
		}
		if err := w.Append(pattern(6000, uint64(i)), i, i); err != nil {
			t.Fatalf("batch %d: append under the hold: %v", i, err)
		}
	}
	held := w.Stats().Bytes
	w.Release()
	if got := w.Stats().Bytes; got >= held || got < 3*6000 {
		t.Fatalf("after Release the buffer holds %d bytes (held %d, data 18000)", got, held)
	}
	// Nothing is free now: a Hold is refused and leaves the buffer as it was.
	before := a.Stats().WriteBufferBytes
	if err := w.Hold(2*4000, 2*4095); !errors.Is(err, ErrFull) {
		t.Fatalf("hold with the arena full: %v", err)
	}
	if after := a.Stats().WriteBufferBytes; after > before {
		t.Fatalf("a refused hold grew the write buffers' memory from %d to %d", before, after)
	}
	if err := w.Append(pattern(100, 9), 3, 3); err != nil && !errors.Is(err, ErrFull) {
		t.Fatal(err)
	}
}

// TestReserveNeverFits: room that no empty buffer could get from an empty arena (the
// batch fits PartitionMax, but not the arena with the padding a roll may put before
// it) is refused as ErrTooLarge, not as ErrFull, which a producer retries for ever (a
// review found a 4 KiB arena answering every produce busy).
func TestReserveNeverFits(t *testing.T) {
	a := newTestArena(t, smallConfig(1)) // one chunk of 4 KiB
	w := newWB(t, a, 0)
	if err := w.Reserve(6, 4095); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("reserve of 6 bytes after 4095 of padding in a 4 KiB arena: %v, want ErrTooLarge", err)
	}
	if err := w.Reserve(6, 0); err != nil {
		t.Fatalf("reserve of 6 bytes in a 4 KiB arena: %v", err)
	}
	if err := w.Append(pattern(6, 1), 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := w.Hold(4*KiB, 0); errors.Is(err, ErrTooLarge) {
		t.Fatalf("a hold a non-empty buffer cannot get now (it may later): %v, want ErrFull", err)
	}
}

// TestHoldOverPartitionMaxIsTooLarge: a Hold of more than PartitionMax, padding counted,
// is ErrTooLarge and holds nothing (the engine then appends batch by batch), so that an
// empty buffer never takes a request's worth past the partition's cap (a review saw 20
// batches of 1 KiB hold 100 KiB under a 64 KiB cap); one within it holds at most a
// chunk past the cap, as one batch may.
func TestHoldOverPartitionMaxIsTooLarge(t *testing.T) {
	c := smallConfig(64)
	c.PartitionMax = 16 * 4 * KiB
	a := newTestArena(t, c)
	w := newWB(t, a, 0)
	if err := w.Hold(20*KiB, 20*4095); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("hold of 20 KiB and 80 KiB of padding under a 64 KiB cap: %v, want ErrTooLarge", err)
	}
	if got := w.Stats().Bytes; got != 0 {
		t.Fatalf("a refused hold left %d bytes held", got)
	}
	if err := w.Hold(40*KiB, 2*4095); err != nil {
		t.Fatal(err)
	}
	if got := w.Stats().Bytes; got > c.PartitionMax+c.ChunkSize {
		t.Fatalf("a hold within the cap holds %d bytes, PartitionMax %d", got, c.PartitionMax)
	}
	w.Release()
}
