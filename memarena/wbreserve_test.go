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
