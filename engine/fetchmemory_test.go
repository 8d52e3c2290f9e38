package engine

import (
	"bytes"
	"testing"
	"time"

	"sluice/batch"
	"sluice/memarena"
	"sluice/persist/local"
)

// spanBytes returns the bytes a result's spans hold.
func spanBytes(res FetchResult) []byte {
	var b []byte
	for i := range res.Spans {
		b = append(b, res.Spans[i].Bytes()...)
	}
	return b
}

// TestFetchMemory: FetchMemory answers what Fetch answers as long as the write buffer
// holds the records (and at the end of the log), and refuses, holding nothing, where
// Fetch would ask the store: records only on disk (after a reload), offsets outside the
// log, a closing partition.
func TestFetchMemory(t *testing.T) {
	a := newArena(t, 8<<20, 64<<10)
	dir := t.TempDir()
	p := openPartition(t, dir, a, local.Options{Sync: local.SyncEveryBatch}, 1)
	for seq := int32(0); seq < 6; seq += 3 {
		if _, err := p.Produce(1, 0, mkBatch(5, seq, 3, 100), testNow); err != nil {
			t.Fatal(err)
		}
	}
	persistNow(t, p) // written too: the buffer keeps the records until the arena needs room
	for _, off := range []int64{0, 4} {
		mem, ok, err := p.FetchMemory(off, 1<<16, nil)
		if !ok || err != nil || len(mem.Spans) == 0 {
			t.Fatalf("FetchMemory(%d) with the records in memory: ok %v, err %v, %d spans", off, ok, err, len(mem.Spans))
		}
		full, err := p.Fetch(off, 1<<16, nil)
		if err != nil || !bytes.Equal(spanBytes(mem), spanBytes(full)) || mem.NextOffset != full.NextOffset || mem.Window != full.Window {
			t.Fatalf("FetchMemory(%d) answered %d bytes to %d, Fetch %d bytes to %d (%v)",
				off, len(spanBytes(mem)), mem.NextOffset, len(spanBytes(full)), full.NextOffset, err)
		}
		mem.Release()
		full.Release()
	}
	end := p.Window().Next
	res, ok, err := p.FetchMemory(end, 1<<16, nil)
	if !ok || err != nil || res.Len() != 0 || res.NextOffset != end || res.Window.Next != end {
		t.Fatalf("FetchMemory at the end %d: ok %v, err %v, %d bytes, next %d, window %+v", end, ok, err, res.Len(), res.NextOffset, res.Window)
	}
	if _, ok, _ := p.FetchMemory(end+1, 1<<16, nil); ok {
		t.Fatal("FetchMemory past the end answered: the store's out-of-range error is the owner's to give")
	}
	if err := p.Shutdown(); err != nil {
		t.Fatal(err)
	}
	p.Close()

	// Reloaded: the records are on disk only.
	p = openPartition(t, dir, a, local.Options{Sync: local.SyncEveryBatch}, 2)
	defer p.Close()
	var dst [4]memarena.Span
	res, ok, err = p.FetchMemory(0, 1<<16, dst[:0])
	if ok || err != nil || res.Len() != 0 || len(res.Spans) != 0 || res.Region.File != nil {
		t.Fatalf("FetchMemory of records on disk only: ok %v, err %v, %d bytes held", ok, err, res.Len())
	}
	full, err := p.Fetch(0, 1<<16, nil)
	if err != nil || full.Region.Len == 0 {
		t.Fatalf("Fetch of the same records: %d bytes from the store, %v", full.Region.Len, err)
	}
	full.Release()
	if res, ok, err = p.FetchMemory(p.Window().Next, 1<<16, nil); !ok || err != nil || res.Len() != 0 {
		t.Fatalf("FetchMemory at the end after a reload: ok %v, err %v", ok, err)
	}
	if err := p.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := p.FetchMemory(p.Window().Next, 1<<16, nil); ok {
		t.Fatal("FetchMemory at the end of a closing partition answered: the store's answer is the owner's to give")
	}
}

// TestPlacedNotCopied: between the store placing a batch (its end moves) and the copy
// into the write buffer (under the append lock, on an appender's goroutine), the owner
// may read or park a long poll. For it the batch does not exist yet: a poll at the old
// end parks (the appender wakes it once the copy is done), Fetch and FetchMemory there
// answer empty without asking the store or counting a miss, and the window's end is the
// old one. Once copied, before its appender moves the end, a read may return the batch:
// the read moves the end itself, so its window covers the batch and a poll where it
// ended parks. Before, the poll took the store's end: it was answered at once, empty (the
// batch in neither the buffer nor the file), and counted as an arena miss; a benchmark
// of the wake (test/wake_timing_test.go) caught it once in a few thousand polls. The
// test places the batch on the store directly, holding the append lock as an appender
// does: the window is a few instructions wide, too narrow to hit on purpose.
func TestPlacedNotCopied(t *testing.T) {
	a := newArena(t, 8<<20, 64<<10)
	p := openPartition(t, t.TempDir(), a, local.Options{Sync: local.SyncNever}, 1)
	if _, err := p.Produce(1, 0, mkBatch(5, 0, 3, 100), testNow); err != nil {
		t.Fatal(err)
	}
	end := p.Window().Next
	b := mkBatch(5, 3, 2, 100)
	h, err := batch.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	p.app.Lock() // an appender, between Place and the copy
	pl, err := p.store.Place(h, int64(len(b)), testNow)
	if err != nil {
		t.Fatal(err)
	}
	if _, next := p.store.Bounds(); next != end+2 {
		t.Fatalf("the store's end after placing 2 records at %d is %d", end, next)
	}
	_, missesBefore := p.Counters()
	if w := p.Window(); w.Next != end {
		t.Errorf("window end %d while the batch at %d is not copied, want %d", w.Next, end, end)
	}
	for _, memoryOnly := range []bool{false, true} {
		res, ok, err := p.fetch(end, 1<<16, nil, memoryOnly)
		if !ok || err != nil || res.Len() != 0 || res.NextOffset != end {
			t.Errorf("fetch (memory only %v) at %d: ok %v, err %v, %d bytes, next %d", memoryOnly, end, ok, err, res.Len(), res.NextOffset)
		}
	}
	if _, misses := p.Counters(); misses != missesBefore {
		t.Errorf("a read at the end counted %d misses", misses-missesBefore)
	}
	var w Wait
	if !p.ParkFetch(&w, end, testNow.Add(time.Minute).UnixNano()) {
		t.Errorf("a long poll at %d was not parked while the batch there is not copied", end)
	} else if !p.FetchesParked() {
		t.Error("the parked poll is not counted: the appender would not wake it")
	}
	// Copied, end not moved yet: a read may return the batch (its bytes are whole), and
	// the window it answers with must then cover it: records past the high watermark
	// are a malformed answer to the consumer (found by the bench at 300 000 records/s).
	batch.SetBaseOffset(b, pl.Base)
	if err := p.copyIn(b, pl, pl.Base+1); err != nil {
		t.Fatal(err)
	}
	for _, memoryOnly := range []bool{false, true} {
		res, ok, err := p.fetch(0, 1<<16, nil, memoryOnly) // from below end: the read runs on into the batch
		if !ok || err != nil || res.NextOffset != end+2 || res.Window.Next < res.NextOffset {
			t.Errorf("fetch (memory only %v) from 0 with a batch at %d copied, end not moved: ok %v, err %v, next %d, window end %d",
				memoryOnly, end, ok, err, res.NextOffset, res.Window.Next)
		}
		res.Release()
	}
	// The read moved the end to what it answered: the window does not go back, a poll
	// there parks, and a wake answers the poll below it (its records came) but not that
	// one (its records are still to come).
	if w := p.Window(); w.Next != end+2 {
		t.Errorf("window end %d after a read answered up to %d", w.Next, end+2)
	}
	var next Wait
	if !p.ParkFetch(&next, end+2, testNow.Add(time.Minute).UnixNano()) {
		t.Errorf("a long poll at %d, where the read's answer ended, was not parked", end+2)
	}
	p.DataArrived()
	if w.Parked() || !next.Parked() {
		t.Errorf("after a wake: the poll at %d parked %v (want woken), the poll at %d parked %v (want parked)",
			end, w.Parked(), end+2, next.Parked())
	}
	p.app.Unlock()
}
