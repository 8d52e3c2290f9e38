package client_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sluice/batch"
	"sluice/client"
	"sluice/wire"
)

// shiftBaseOffset adds delta to the base offset of the n-th batch (from 0) of a segment
// file, as a damaged disk or a buggy tool might: the base offset is outside the batch's
// CRC, so only offset continuity can tell. It returns the batch's header before the change.
func shiftBaseOffset(t *testing.T, path string, n int, delta int64) batch.Header {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pos := 0
	for i := 0; ; i++ {
		h, err := batch.ParseHeader(data[pos:])
		if err != nil {
			t.Fatalf("batch %d of %s: %v", i, path, err)
		}
		if i == n {
			binary.LittleEndian.PutUint64(data[pos:], uint64(h.BaseOffset+delta))
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			return h
		}
		pos += h.Size()
	}
}

// TestConsumerStopsAtDamagedBaseOffset: the base offset of the third batch of a sealed
// segment is raised by 1000 on disk while the broker is down. A consumer reading from the
// oldest offset gets the records before that batch, then a clear error, never a record
// past it, and every later Poll fails the same way. (Before the checks it skipped 1000
// records silently.) Two checks guard this, end to end: the broker checks every header it
// serves (it answers corrupt_data, naming the file and the offset) and the consumer checks
// offsets are dense (a *GapError, for damage the broker cannot see, such as in flight;
// TestRecordIterOffsetsDense covers that check alone). Whichever fires first, the
// consumer stops at the damaged batch.
//
// 72 MiB follow the damaged batch so that it lies beyond the last 64 MiB whose headers
// the broker reads when it loads the partition (there, it would load the partition
// damaged instead: TestDamagedPartitionServesTheOthers in test/).
func TestConsumerStopsAtDamagedBaseOffset(t *testing.T) {
	b := startBroker(t)
	a, err := client.NewAdmin(client.Brokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.CreateTopic(ctxFor(t, 30*time.Second), "t", 1, wire.TopicOptions{SegmentBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	p := newProducer(t, b.Addr, "t", client.BatchBytes(64<<10))
	ctx := ctxFor(t, 2*time.Minute)
	const small, per, bulk = 5, 10, 72 << 8 // five batches of 10 records, then 72 MiB of 4 KiB records
	for i := range small*per + bulk {
		size := 8
		if i >= small*per {
			size = 4 << 10
		}
		r := &client.Record{Value: value(uint64(i), size), Timestamp: 1_000_000 + int64(i)}
		if err := p.Produce(ctx, r); err != nil {
			t.Fatal(err)
		}
		if i < small*per && i%per == per-1 {
			if err := p.WaitPersisted(ctx); err != nil { // seals the batch
				t.Fatal(err)
			}
		}
	}
	closeProducer(t, p)
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	third := shiftBaseOffset(t, filepath.Join(b.Dir, "t", "0", "00000000000000000000.log"), 2, 1000)
	b.Restart()

	c, err := client.NewConsumer(ctx, "t", client.Brokers(b.Addr), client.FetchMaxWait(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got int64
	var failed error // the first error: from Poll (the broker's) or the iteration (the client's)
	for got < small*per+bulk {
		if failed = c.Poll(ctx); failed != nil {
			break // the damage: checked below
		}
		for c.Next() {
			if id := int64(binary.LittleEndian.Uint64(c.Record().Value)); id != got || c.Record().Offset != got {
				t.Fatalf("record %d at offset %d, want %d", id, c.Record().Offset, got)
			}
			got++
		}
		if failed = c.Err(); failed != nil {
			break
		}
	}
	var ge *client.GapError
	var we *wire.ProtocolError
	switch err := failed; {
	case got != third.BaseOffset:
		t.Fatalf("read %d records, then %v; want %d records", got, err, third.BaseOffset)
	case errors.As(err, &ge):
		if ge.Topic != "t" || ge.Partition != 0 || ge.Expected != third.BaseOffset || ge.Base != third.BaseOffset+1000 {
			t.Fatalf("gap %+v, want one at %d", ge, third.BaseOffset)
		}
	case errors.As(err, &we) && we.Code == wire.CodeCorruptData:
	default:
		t.Fatalf("after %d records: %v, want a gap or corrupt_data", got, err)
	}
	if err := c.Poll(ctx); err == nil || err.Error() != failed.Error() {
		t.Fatalf("poll after the damage: %v, want %v again", err, failed)
	}
}
