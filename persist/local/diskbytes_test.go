package local

import (
	"errors"
	"os"
	"testing"
)

// batchBytes is the size of the deterministic batches for [from, to).
func batchBytes(from, to int64) int64 {
	n := int64(0)
	for o := from; o < to; o += int64(countAt(o)) {
		n += int64(len(makeBatch(o)))
	}
	return n
}

// TestDiskBytes: DiskBytes (read without the log's lock, for the broker's
// sluice_partition_log_bytes) is the bytes of the batches in the segments as they are
// written; after a restart it counts the segments Open left unsized once the first
// retention pass sizes them, with no retention settings too; and it falls with what
// retention deletes.
func TestDiskBytes(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 4 << 10, Sync: SyncNever}
	l := openLog(t, dir, opts)
	if n := l.DiskBytes(); n != 0 {
		t.Fatalf("an empty log holds %d bytes", n)
	}
	next := appendN(t, l, 300)
	full := batchBytes(0, next)
	if n := l.DiskBytes(); n != full {
		t.Fatalf("DiskBytes %d after writing %d bytes of batches", n, full)
	}
	if st := stats(t, l); st.Segments < 4 || st.Bytes != full {
		t.Fatalf("stats %+v, want 4 segments or more holding %d bytes", st, full)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l = openLog(t, dir, opts)
	before := l.DiskBytes()
	if before >= full {
		t.Fatalf("Open sized every segment (%d of %d bytes): this test no longer shows retention's pass sizing them", before, full)
	}
	if n, err := l.ApplyRetention(l.Durable()); err != nil || n != 0 {
		t.Fatalf("a retention pass without retention settings deleted %d segments (%v)", n, err)
	}
	if n := l.DiskBytes(); n != full {
		t.Fatalf("after the first retention pass DiskBytes is %d (%d at open), want %d", n, before, full)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	opts.RetentionBytes = 8 << 10
	l = openLog(t, dir, opts)
	if n, err := l.ApplyRetention(l.Durable()); err != nil || n == 0 {
		t.Fatalf("retention to %d bytes deleted %d segments (%v)", opts.RetentionBytes, n, err)
	}
	if n, want := l.DiskBytes(), batchBytes(l.Start(), l.Written()); n != want || n >= full {
		t.Fatalf("after retention DiskBytes is %d, want the %d bytes of batches [%d, %d)", n, want, l.Start(), l.Written())
	}
}

// TestDiskBytesOfDamagedLog: a log opened damaged (a bit flipped in its last segment
// after a clean stop) deletes nothing and takes no writes, but still holds its files:
// its retention pass fails with ErrDamaged and still sizes the segments Open left
// unsized, so DiskBytes counts everything up to the damage.
func TestDiskBytesOfDamagedLog(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentBytes: 4 << 10, Sync: SyncNever}
	l := openLog(t, dir, opts)
	appendN(t, l, 300)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	seg := lastSegment(t, dir)
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	data[10] ^= 0x10 // in the header of the segment's first batch
	if err := os.WriteFile(seg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, opts)
	var ce *CorruptionError
	if err := l.Damage(); !errors.As(err, &ce) {
		t.Fatalf("damage %v, want a corruption", err)
	}
	want := batchBytes(0, ce.Offset)
	if before := l.DiskBytes(); before >= want {
		t.Fatalf("Open sized every segment (%d of %d bytes): this test no longer shows the pass sizing them", before, want)
	}
	if _, err := l.ApplyRetention(l.Durable()); !errors.Is(err, ErrDamaged) {
		t.Fatalf("retention on a damaged log: %v, want ErrDamaged", err)
	}
	if n := l.DiskBytes(); n != want {
		t.Fatalf("a damaged log's DiskBytes after a retention pass is %d, want the %d bytes below the damage at %d", n, want, ce.Offset)
	}
}
