package client

import (
	"bytes"
	"testing"
	"time"
)

// TestAddReadsTheClockOnlyToOpen: a record that brings its timestamp and no clock
// reading (now < 0) makes add read the producer's clock only when it opens a batch: into
// an open batch it reads nothing (the clock is taken away and add must not touch it),
// and a record that seals the batch by size and opens the next reads it for that one.
func TestAddReadsTheClockOnlyToOpen(t *testing.T) {
	w := testWindow(1024, 1)
	clock := newRecordClock(time.Now().Add(-time.Hour)) // an hour of monotonic time behind it
	w.sh.clock = &clock
	rec := func(i int) *Record { return &Record{Value: bytes.Repeat([]byte{byte(i)}, 100), Timestamp: 1000} }
	if !w.add(rec(0), 3, 1000, -1) {
		t.Fatal("opening a batch did not ask for the driver")
	}
	if w.openFirst < int64(time.Hour) {
		t.Fatalf("the batch opened at %d ns on the windows' clock, want at least an hour: the clock was not read", w.openFirst)
	}
	opened := w.openFirst
	w.sh.clock = nil         // a read now would panic
	for i := 1; i < 9; i++ { // 9 records of 100 bytes fit a batch of 1024
		w.add(rec(i), 3, 1000, -1)
	}
	if !w.open || w.openFirst != opened || w.bld.Count() != 9 {
		t.Fatalf("open %v, openFirst %d (was %d), %d records: want the first batch still open with 9", w.open, w.openFirst, opened, w.bld.Count())
	}
	w.sh.clock = &clock
	if !w.add(rec(9), 3, 1000, -1) || len(w.q) != 1 || !w.open || w.openFirst < opened {
		t.Fatalf("the record past the batch size: %d sealed, open %v, openFirst %d (first %d)", len(w.q), w.open, w.openFirst, opened)
	}
}
