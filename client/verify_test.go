package client

import (
	"bytes"
	"fmt"
	"testing"

	"sluice/batch"
	"sluice/wire"
)

// TestVerifyBatches: the fetcher's check covers the batches from the start up to the
// first one whose CRC fails or that is cut short, and the next offset is the one after
// the last whole batch, damaged or not (the iterator reports the damage where it is).
func TestVerifyBatches(t *testing.T) {
	data := sealAll(t, batch.CodecLZ4, testRecords(400), 0)
	starts := batchStarts(t, data)
	if len(starts) < 4 {
		t.Fatalf("%d batches, want at least 4", len(starts))
	}
	if next, v := verifyBatches(data); next != 400 || v != len(data) {
		t.Fatalf("whole answer: next %d, verified %d of %d; want 400 and all", next, v, len(data))
	}
	if next, v := verifyBatches(nil); next != 0 || v != 0 {
		t.Fatalf("no records: next %d, verified %d", next, v)
	}
	last, _ := batch.ParseHeader(data[starts[len(starts)-1]:])
	if next, v := verifyBatches(data[:len(data)-1]); next != last.BaseOffset || v != starts[len(starts)-1] {
		t.Fatalf("last batch cut short: next %d, verified %d; want %d and %d", next, v, last.BaseOffset, starts[len(starts)-1])
	}
	bad := bytes.Clone(data)
	bad[starts[2]+batch.HeaderSize+3] ^= 0x40 // in the third batch's records: its CRC fails
	if next, v := verifyBatches(bad); next != 400 || v != starts[2] {
		t.Fatalf("third batch damaged: next %d, verified %d; want 400 and %d", next, v, starts[2])
	}
}

// TestRecordIterVerified: the iterator computes no CRC in the prefix the fetcher
// verified, and computes it again after: a damaged byte inside the prefix comes out as
// it is (which is what shows the CRC is skipped; the fetcher never reports such a prefix),
// one after the prefix stops the iteration there, with the records before it delivered.
func TestRecordIterVerified(t *testing.T) {
	const total = 300
	data := sealAll(t, batch.CodecNone, testRecords(total), 0)
	starts := batchStarts(t, data)
	if len(starts) < 3 {
		t.Fatalf("%d batches, want at least 3", len(starts))
	}
	first, _ := batch.ParseHeader(data)
	i := bytes.Index(data[starts[1]:], fmt.Appendf(nil, "value %d;", first.Count)) // the second batch's first record
	if i < 0 {
		t.Fatal("no record value in the second batch")
	}
	data[starts[1]+i+len("value ")] = 'X'
	read := func(verified int) (n int64, damaged bool, err error) {
		var ri recordIter
		ri.hi = wire.LogicalPartitions - 1
		var cur cursor
		ri.reset(data, &cur)
		ri.verified = verified
		for ri.next() {
			n++
			damaged = damaged || bytes.Contains(ri.rec.Value, []byte("value X"))
		}
		return n, damaged, ri.err
	}
	if n, damaged, err := read(starts[2]); err != nil || !damaged || n != total {
		t.Fatalf("damage inside the verified prefix: %d records, damaged byte seen %v, %v; want %d, the byte, no error", n, damaged, err, total)
	}
	if n, damaged, err := read(starts[1]); err == nil || damaged || n != int64(first.Count) {
		t.Fatalf("damage after the verified prefix: %d records, damaged byte seen %v, %v; want the first batch's %d and an error", n, damaged, err, first.Count)
	}
	if n, _, err := read(0); err == nil || n != int64(first.Count) {
		t.Fatalf("nothing verified: %d records, %v; want %d and an error", n, err, first.Count)
	}
}
