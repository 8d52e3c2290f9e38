// Package batchtest builds batches that tests need and no producer would make: batches
// whose header and CRC check out and whose records no consumer can read. The engine's
// record check and the broker's refusal of such batches (test/) are tested with the
// same ones.
package batchtest

import (
	"fmt"
	"testing"

	"sluice/batch"
	"sluice/codec"
)

// Seal seals a batch of producer pid (sequence seq; -1 and -1 for a producer without
// idempotence), stamped at ms, over a records section its header misdescribes: count
// records of size bytes (uncompressed), compressed with c. Its CRC is right, so that
// only a look at the records tells it from a good batch; tb fails if the header or CRC
// alone would refuse it.
func Seal(tb testing.TB, pid int64, seq int32, ms int64, c batch.Codec, count, size uint32, section []byte) []byte {
	tb.Helper()
	h := batch.Header{ProducerID: pid, BaseSequence: seq, Codec: c, Count: count, UncompressedSize: size,
		FirstTimestamp: ms, MaxTimestamp: ms}
	b, err := batch.Seal(nil, h, section)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := batch.Check(b); err != nil {
		tb.Fatalf("the unreadable batch is refused by its header or CRC already: %v", err)
	}
	return b
}

// Unreadable returns batches of producer pid at sequence seq (-1 and -1: no
// idempotence), stamped at ms, by what is wrong with them: each one's header and CRC
// check out and its records cannot be read (each was found by a review, stored and
// acknowledged, and every consumer stopped at it for good).
func Unreadable(tb testing.TB, pid int64, seq int32, ms int64) map[string][]byte {
	tb.Helper()
	var comp codec.Compressor
	records := func(n int) []byte {
		var b batch.Builder
		b.Reset(nil, pid, seq)
		for i := range n {
			b.Add(uint16(i), ms, nil, fmt.Appendf(nil, "record %d", i))
		}
		return append([]byte(nil), b.Records()...)
	}
	three, ten := records(3), records(10)
	bad := append([]byte(nil), three...)
	bad[0] = 0x7f // the first record's body length runs past the section
	junk := []byte("this is not a compressed frame, whatever its header says")
	zstd := func(recs []byte) []byte { return comp.Compress(nil, batch.CodecZstd, recs) }
	seal := func(c batch.Codec, count, size uint32, section []byte) []byte {
		tb.Helper()
		return Seal(tb, pid, seq, ms, c, count, size, section)
	}
	return map[string][]byte{
		"zstd junk":                   seal(batch.CodecZstd, 2, 64, junk),
		"lz4 junk":                    seal(batch.CodecLZ4, 2, 64, junk),
		"s2 junk":                     seal(batch.CodecS2, 2, 64, junk),
		"zstd, a record more":         seal(batch.CodecZstd, 2, uint32(len(three)), zstd(three)),
		"zstd, a record less":         seal(batch.CodecZstd, 11, uint32(len(ten)), zstd(ten)),
		"zstd, size 10 bytes over":    seal(batch.CodecZstd, 3, uint32(len(three)+10), zstd(three)),
		"zstd, a bad record":          seal(batch.CodecZstd, 3, uint32(len(bad)), zstd(bad)),
		"uncompressed, a bad record":  seal(batch.CodecNone, 3, 0, bad),
		"uncompressed, a record more": seal(batch.CodecNone, 2, 0, three),
		"millions of offsets in 60 B": seal(batch.CodecZstd, 9_586_972, 64<<20-56, junk[:4]),
	}
}
