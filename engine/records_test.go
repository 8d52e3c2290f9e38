package engine

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"sluice/batch"
	"sluice/codec"
	"sluice/internal/batchtest"
	"sluice/persist/local"
)

// hostileBatches are batchtest.Unreadable's batches of producer pid at sequence 0.
func hostileBatches(t testing.TB, pid int64) map[string][]byte {
	t.Helper()
	return batchtest.Unreadable(t, pid, 0, 1_700_000_000_000)
}

// TestProduceRefusesUnreadableRecords: with a RecordChecker (the broker's default) a
// request holding a batch whose records cannot be read is refused whole with
// ErrInvalidBatch and appends nothing, the good batch before it included; the
// producer's sequences are left as they were. Without one (a broker trusting its
// producers) the same batches are stored, which is what the checker is for.
func TestProduceRefusesUnreadableRecords(t *testing.T) {
	a := newArena(t, 64<<20, 64<<10)
	for name, hostile := range hostileBatches(t, 7) {
		t.Run(name, func(t *testing.T) {
			p := openPartition(t, t.TempDir(), a, local.Options{Sync: local.SyncNever}, 1)
			defer p.Close()
			good := mkBatch(9, 0, 2, 10)
			req := append(append([]byte(nil), good...), hostile...)
			if _, err := p.Produce(1, 1, req, testNow); !errors.Is(err, ErrInvalidBatch) {
				t.Fatalf("a request with the batch: %v, want ErrInvalidBatch", err)
			}
			if next := p.Window().Next; next != 0 {
				t.Fatalf("the refused request appended offsets 0 to %d", next-1)
			}
			if res, err := p.Produce(1, 1, good, testNow); err != nil || res.Appended != 1 || res.Base != 0 {
				t.Fatalf("the good batch alone, after the refusal: %+v, %v", res, err)
			}

			trusting := openPartitionAt(t, t.TempDir(), a, local.Options{Sync: local.SyncNever}, 1, nil)
			defer trusting.Close()
			if res, err := trusting.Produce(1, 1, hostile, testNow); err != nil || res.Appended != 1 {
				t.Fatalf("without a checker: %+v, %v; want the batch stored (else this case tests nothing)", res, err)
			}
		})
	}
}

// TestProduceKeepsReadableCompressedBatches: every codec's well-formed batches pass the
// checker and are stored byte for byte, sent one by one and several to a request.
func TestProduceKeepsReadableCompressedBatches(t *testing.T) {
	a := newArena(t, 64<<20, 64<<10)
	p := openPartition(t, t.TempDir(), a, local.Options{Sync: local.SyncNever}, 1)
	defer p.Close()
	var comp codec.Compressor
	var sent [][]byte
	for c := batch.CodecNone; c <= batch.CodecLZ4; c++ {
		var req []byte
		for i := range 3 {
			var b batch.Builder
			seq := int32(len(sent) * 5)
			b.Reset(nil, 4, seq)
			for j := range 5 {
				b.Add(uint16(j), 1_700_000_000_000+int64(j), []byte("k"), fmt.Appendf(nil, "%v batch %d record %d ..........", c, i, j))
			}
			bt := comp.Finish(&b, c)
			sent = append(sent, bt)
			req = append(req, bt...)
		}
		if res, err := p.Produce(1, 1, req, testNow); err != nil || res.Appended != 3 {
			t.Fatalf("%v: %+v, %v", c, res, err)
		}
	}
	got := logBatches(t, p, 0)
	if len(got) != len(sent) {
		t.Fatalf("stored %d batches, sent %d", len(got), len(sent))
	}
	codecs := map[batch.Codec]int{}
	for i := range got {
		if !sameBatch(got[i], sent[i]) {
			t.Fatalf("batch %d stored differs from the one sent", i)
		}
		h, _ := batch.ParseHeader(got[i])
		codecs[h.Codec]++
	}
	for c := batch.CodecNone; c <= batch.CodecLZ4; c++ {
		if codecs[c] != 3 {
			t.Fatalf("stored batches by codec: %v; want 3 of each (a section that does not shrink is sent uncompressed)", codecs)
		}
	}
}

// TestProduceRefusesNewerLayoutStamp: a batch stamped with a layout newer than the
// request's topic version (its records routed by a layout the partition does not serve)
// is refused, and nothing is appended; a stamp of the version itself, an older one or
// none is taken. A consumer reaching such a batch would wait for a layout that does not
// exist (a review found one stored, and its consumer stopped there).
func TestProduceRefusesNewerLayoutStamp(t *testing.T) {
	a := newArena(t, 64<<20, 64<<10)
	p := openPartition(t, t.TempDir(), a, local.Options{Sync: local.SyncNever}, 1)
	defer p.Close()
	if _, err := p.Produce(1, 1, append(mkBatch(0, -1, 1, 10), stampedBatch(2, 0)...), testNow); !errors.Is(err, ErrInvalidBatch) {
		t.Fatalf("a batch stamped with layout 2 at version 1: %v, want ErrInvalidBatch", err)
	}
	if next := p.Window().Next; next != 0 {
		t.Fatalf("the refused request appended offsets 0 to %d", next-1)
	}
	for _, layout := range []uint16{0, 1, 65535} {
		if res, err := p.Produce(1, 1, stampedBatch(layout, 0), testNow); err != nil || res.Appended != 1 {
			t.Fatalf("a batch stamped with layout %d at version 1: %+v, %v", layout, res, err)
		}
	}
}

// TestRecordCheckOutsideAppendLock: a produced batch's records are checked before the
// partition's append lock is taken, so that a request whose check is long (a large
// compressed batch, decompressed) does not stall the partition's other appenders; the
// sequences are still checked under it. The checker's probe tries the lock from inside
// each check: it must be free there. A request refused by its records, and one for a
// sequence gap behind a checked batch, append nothing; one the window refuses (another
// session) is not checked at all.
func TestRecordCheckOutsideAppendLock(t *testing.T) {
	p, pr := probedPartition(t)
	defer p.Close()
	var comp codec.Compressor
	var b batch.Builder
	b.Reset(nil, 4, 0)
	for j := range 50 {
		b.Add(uint16(j), 1_700_000_000_000, nil, fmt.Appendf(nil, "record %d, compressed with its neighbours", j))
	}
	good := comp.Finish(&b, batch.CodecZstd)
	if res, err := p.Produce(1, 1, good, testNow); err != nil || res.Appended != 1 {
		t.Fatalf("a good zstd batch: %+v, %v", res, err)
	}
	hostile := hostileBatches(t, 4)["zstd, a bad record"]
	if _, err := p.Produce(1, 1, hostile, testNow); !errors.Is(err, ErrInvalidBatch) {
		t.Fatalf("a batch of unreadable records: %v, want ErrInvalidBatch", err)
	}
	gap := mkBatch(4, 70, 2, 10) // producer 4 is at sequence 49: 70 leaves a gap
	if _, err := p.Produce(1, 1, gap, testNow); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("a sequence gap: %v, want ErrOutOfOrderSequence", err)
	}
	if _, err := p.Produce(1, 99, mkBatch(4, 50, 2, 10), testNow); !errors.Is(err, ErrSessionMismatch) {
		t.Fatalf("a request of another session: %v, want ErrSessionMismatch", err)
	}
	if pr.checks != 3 || pr.locked != 0 {
		t.Fatalf("%d record checks, %d of them under the append lock; want 3 (none for the request the window refuses), none", pr.checks, pr.locked)
	}
	if next := p.Window().Next; next != 50 {
		t.Fatalf("the log ends at %d, want 50: a refused request appended", next)
	}
}

// TestProduceRefusesMisroutedRecords: a stamped batch whose records have logical ids
// outside the range the partition serves at its version (PartitionConfig.Partitions) is
// refused whole (ErrInvalidBatch), whatever layout it is stamped with: records routed
// by an older layout and sent again after an expansion unrouted (a review's case) land
// where no consumer of their range reads them. Records inside the range are taken,
// with an older stamp too; a batch without a stamp is not held to a range, nor is any
// batch on a partition that does not know its topic's partition count, nor on one
// trusting its producers. A Switch holds the records to the new version's range.
func TestProduceRefusesMisroutedRecords(t *testing.T) {
	a := newArena(t, 64<<20, 64<<10)
	open := func(rc *RecordChecker, partitions int) *Partition {
		l, err := local.Open(t.TempDir(), local.Options{Sync: local.SyncNever})
		if err != nil {
			t.Fatal(err)
		}
		// Partition 1 of 4 at version 3: logical ids 16384 to 32767.
		p, err := Open(PartitionConfig{Topic: "t", ID: 1, Version: 3, Session: 1, Records: rc, Partitions: partitions}, l, a)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		return p
	}
	for _, c := range []struct {
		name  string
		batch []byte
		ok    bool
	}{
		{"in range", stampedBatch(3, 16384, 20000, 32767), true},
		{"one record below", stampedBatch(3, 16384, 16383), false},
		{"one record above", stampedBatch(3, 32767, 32768), false},
		{"an older layout's records, out of range", stampedBatch(2, 40000), false},
		{"an older layout's records, in range", stampedBatch(2, 16384, 30000), true},
		{"no stamp", stampedBatch(0, 0, 65535), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := open(NewRecordChecker(), 4)
			res, err := p.Produce(3, 1, c.batch, testNow)
			if c.ok && (err != nil || res.Appended != 1) {
				t.Fatalf("%+v, %v; want it appended", res, err)
			}
			if !c.ok && (!errors.Is(err, ErrInvalidBatch) || p.Window().Next != 0) {
				t.Fatalf("%v, log at %d; want ErrInvalidBatch and nothing appended", err, p.Window().Next)
			}
			for name, other := range map[string]*Partition{"trusting its producers": open(nil, 4), "without a partition count": open(NewRecordChecker(), 0)} {
				if res, err := other.Produce(3, 1, c.batch, testNow); err != nil || res.Appended != 1 {
					t.Fatalf("a partition %s: %+v, %v; want it appended", name, res, err)
				}
			}
		})
	}

	// Expanded to 8 partitions at version 4: partition 1 serves 8192 to 16383.
	p := open(NewRecordChecker(), 4)
	p.Freeze()
	p.Switch(4, 8)
	if _, err := p.Produce(4, 1, stampedBatch(4, 20000), testNow); !errors.Is(err, ErrInvalidBatch) {
		t.Fatalf("after the switch, a record of the old range: %v, want ErrInvalidBatch", err)
	}
	if res, err := p.Produce(4, 1, stampedBatch(4, 8192, 16383), testNow); err != nil || res.Appended != 1 {
		t.Fatalf("after the switch, records of the new range: %+v, %v", res, err)
	}
}

// TestProduceErrorOfFirstFailingBatch (from a review): the refusal of a request is its
// first failing batch's, as when every batch was checked whole in turn, although the
// checks of the records run before the append lock and the sequences' under it: a
// sequence gap before a corrupt batch is the gap, a corrupt batch before a gap is
// corrupt.
func TestProduceErrorOfFirstFailingBatch(t *testing.T) {
	a := newArena(t, 64<<20, 64<<10)
	p := openPartitionAt(t, t.TempDir(), a, local.Options{Sync: local.SyncNever}, 1, NewRecordChecker())
	defer p.Close()
	if _, err := p.Produce(1, 1, mkBatch(4, 0, 5, 10), testNow); err != nil {
		t.Fatal(err)
	}
	corrupt := func(b []byte) []byte {
		b[len(b)-1] ^= 1 // its CRC fails
		return b
	}
	gap := mkBatch(4, 70, 2, 10) // producer 4 is at sequence 4: 70 leaves a gap
	if _, err := p.Produce(1, 1, slices.Concat(gap, corrupt(mkBatch(4, 72, 2, 10))), testNow); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("a gap, then a corrupt batch: %v, want ErrOutOfOrderSequence", err)
	}
	if _, err := p.Produce(1, 1, slices.Concat(corrupt(mkBatch(4, 5, 2, 10)), gap), testNow); !errors.Is(err, ErrInvalidBatch) {
		t.Fatalf("a corrupt batch, then a gap: %v, want ErrInvalidBatch", err)
	}
	if next := p.Window().Next; next != 5 {
		t.Fatalf("the log ends at %d, want 5", next)
	}
}

// lockProbe counts a partition's record checks, and those made while its append lock
// was held.
type lockProbe struct{ checks, locked int }

// probedPartition opens a partition whose record checker tries the append lock from
// inside each check (RecordChecker.probe) and counts in the probe returned.
func probedPartition(t *testing.T) (*Partition, *lockProbe) {
	a := newArena(t, 64<<20, 64<<10)
	rc := NewRecordChecker()
	p := openPartitionAt(t, t.TempDir(), a, local.Options{Sync: local.SyncNever}, 1, rc)
	pr := new(lockProbe)
	rc.probe = func() {
		pr.checks++
		if !p.app.TryLock() {
			pr.locked++
			return
		}
		p.app.Unlock()
	}
	return p, pr
}

// stampedBatch is a batch without idempotence stamped with layout (0: none), one record
// per logical id given.
func stampedBatch(layout uint16, logical ...uint16) []byte {
	var b batch.Builder
	b.Reset(nil, -1, -1)
	b.SetLayout(layout)
	for i, l := range logical {
		b.Add(l, 1_700_000_000_000, nil, fmt.Appendf(nil, "record %d", i))
	}
	return b.Finish()
}
