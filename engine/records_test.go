package engine

import (
	"errors"
	"fmt"
	"testing"

	"sluice/batch"
	"sluice/codec"
	"sluice/persist/local"
)

// sealed builds a batch of producer pid over a records section a producer got wrong: its
// header says count records of size bytes, compressed with c, and its CRC is right, so
// that only a look at the records tells it from a good batch.
func sealed(t testing.TB, pid int64, seq int32, c batch.Codec, count, size uint32, section []byte) []byte {
	t.Helper()
	h := batch.Header{ProducerID: pid, BaseSequence: seq, Codec: c, Count: count, UncompressedSize: size,
		FirstTimestamp: 1_700_000_000_000, MaxTimestamp: 1_700_000_000_000}
	b, err := batch.Seal(nil, h, section)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := batch.Check(b); err != nil {
		t.Fatalf("the hostile batch is refused by its header or CRC already: %v", err)
	}
	return b
}

// hostileBatches are batches whose header and CRC check out and whose records no
// consumer can read (found by a review: each was stored and acknowledged, and every
// consumer stopped at it for good).
func hostileBatches(t testing.TB, pid int64) map[string][]byte {
	var comp codec.Compressor
	records := func(n int) []byte {
		var b batch.Builder
		b.Reset(nil, pid, 0)
		for i := range n {
			b.Add(uint16(i), 1_700_000_000_000, nil, fmt.Appendf(nil, "record %d", i))
		}
		return append([]byte(nil), b.Records()...)
	}
	three, ten := records(3), records(10)
	bad := append([]byte(nil), three...)
	bad[0] = 0x7f // the first record's body length runs past the section
	junk := []byte("this is not a compressed frame, whatever its header says")
	zstd := func(recs []byte) []byte { return comp.Compress(nil, batch.CodecZstd, recs) }
	return map[string][]byte{
		"zstd junk":                   sealed(t, pid, 0, batch.CodecZstd, 2, 64, junk),
		"lz4 junk":                    sealed(t, pid, 0, batch.CodecLZ4, 2, 64, junk),
		"s2 junk":                     sealed(t, pid, 0, batch.CodecS2, 2, 64, junk),
		"zstd, a record more":         sealed(t, pid, 0, batch.CodecZstd, 2, uint32(len(three)), zstd(three)),
		"zstd, a record less":         sealed(t, pid, 0, batch.CodecZstd, 11, uint32(len(ten)), zstd(ten)),
		"zstd, size 10 bytes over":    sealed(t, pid, 0, batch.CodecZstd, 3, uint32(len(three)+10), zstd(three)),
		"zstd, a bad record":          sealed(t, pid, 0, batch.CodecZstd, 3, uint32(len(bad)), zstd(bad)),
		"uncompressed, a bad record":  sealed(t, pid, 0, batch.CodecNone, 3, 0, bad),
		"uncompressed, a record more": sealed(t, pid, 0, batch.CodecNone, 2, 0, three),
		"millions of offsets in 60 B": sealed(t, pid, 0, batch.CodecZstd, 9_586_972, 64<<20-56, junk[:4]),
	}
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
	stamped := func(layout uint16) []byte {
		var b batch.Builder
		b.Reset(nil, -1, -1)
		b.SetLayout(layout)
		b.Add(0, 1_700_000_000_000, nil, []byte("x"))
		return b.Finish()
	}
	if _, err := p.Produce(1, 1, append(mkBatch(0, -1, 1, 10), stamped(2)...), testNow); !errors.Is(err, ErrInvalidBatch) {
		t.Fatalf("a batch stamped with layout 2 at version 1: %v, want ErrInvalidBatch", err)
	}
	if next := p.Window().Next; next != 0 {
		t.Fatalf("the refused request appended offsets 0 to %d", next-1)
	}
	for _, layout := range []uint16{0, 1, 65535} {
		if res, err := p.Produce(1, 1, stamped(layout), testNow); err != nil || res.Appended != 1 {
			t.Fatalf("a batch stamped with layout %d at version 1: %+v, %v", layout, res, err)
		}
	}
}
