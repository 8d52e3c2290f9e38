package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"sluice/batch"
	"sluice/codec"
	"sluice/memarena"
	"sluice/persist/local"
)

// FuzzProduce sends produce requests made from arbitrary bytes to a new partition: raw,
// the bytes of a request as a client may send anything, then the requests ops describes.
// Each 8 bytes of ops make one batch: a producer (0: none, or one of three ids); its
// base sequence (the one after the producer's last batch, its last batch's again, the
// int32 in bytes 2-5, or -1: no idempotence); a record count of 1 to 8; whether to seal
// it over one record too many (a right CRC over records that do not match the header);
// whether to flip one of its bits, and which; and whether a new request starts after
// it. It checks: no panic; a refused request is refused with ErrInvalidBatch or
// ErrOutOfOrderSequence and appends nothing; every batch stored can be read to its last
// record, decompressed if it is compressed; an accepted request counts each of its
// batches as appended or as a duplicate, and the log then holds, from where it ended
// before, the batches counted as appended, in request order, byte for byte (base
// offsets aside), at dense offsets; a request that appended all its batches answers its
// first and last offsets; and an accepted request of idempotent batches only, sent again
// (a client's retry), is accepted again and appends nothing.
func FuzzProduce(f *testing.F) {
	chunk := func(producer, mode byte, seq int32, count, flags byte) []byte {
		c := []byte{producer, mode, 0, 0, 0, 0, count, flags}
		binary.LittleEndian.PutUint32(c[2:], uint32(seq))
		return c
	}
	const last = 0x80 // flags: a new request starts after this batch
	f.Add(mkBatch(0, -1, 3, 10), []byte(nil))
	f.Add(append(mkBatch(5, 0, 2, 10), mkBatch(5, 2, 1, 10)...), bytes.Join([][]byte{
		chunk(1, 2, 0, 2, last), chunk(1, 0, 0, 0, 0), chunk(1, 0, 0, 3, last), chunk(1, 1, 0, 3, last), // next, next, resend
		chunk(2, 2, 1<<31-2, 0, 0), chunk(2, 0, 0, 0, last), chunk(0, 0, 0, 5, 0x40|7), // near the largest sequence; a flipped bit
	}, nil))
	f.Add([]byte("hello, world, this is not a batch at all, no no no no"), bytes.Join([][]byte{
		chunk(3, 2, 7, 0, 0), chunk(3, 2, 9, 0, last), chunk(3, 3, 0, 1, last), // a gap; no idempotence
	}, nil))
	f.Add(mkBatch(9, 0, 1, 10)[:30], []byte{1, 2, 3})
	f.Add(hostileBatches(f, 8)["zstd, a record more"], []byte(nil))
	f.Add(append(mkBatch(5, 0, 2, 10), hostileBatches(f, 5)["lz4 junk"]...), chunk(1, 0x80, 0, 3, last))
	a := newArena(f, 16<<20, 64<<10)
	f.Fuzz(func(t *testing.T, raw, ops []byte) {
		p := openPartition(t, t.TempDir(), a, local.Options{Sync: local.SyncNever, SegmentBytes: 64 << 10}, 1)
		defer p.Close()
		produce(t, p, raw, nil)
		type sent struct{ seq, count int32 }
		prev := map[int64]sent{} // each producer's last batch
		var req [][]byte
		for ; len(ops) >= 8; ops = ops[8:] {
			pid := int64(ops[0] % 4)
			count := int32(ops[6]%8) + 1
			seq := int32(-1)
			switch ops[1] % 4 {
			case 0:
				if s, ok := prev[pid]; ok {
					seq = s.seq + s.count
				}
			case 1:
				if s, ok := prev[pid]; ok {
					seq, count = s.seq, s.count
				}
			case 2:
				seq = int32(binary.LittleEndian.Uint32(ops[2:]))
			}
			if pid == 0 {
				seq = -1
			} else if seq >= 0 {
				prev[pid] = sent{seq, count}
			}
			b := mkBatch(pid, seq, int(count), 10)
			if ops[1]&0x80 != 0 { // sealed as if it held a record more
				h, _ := batch.ParseHeader(b)
				h.Count++
				b, _ = batch.Seal(nil, h, h.Records(b))
			}
			if ops[7]&0x40 != 0 {
				b[int(ops[7]&0x3f)%len(b)] ^= 1 << (ops[2] % 8)
			}
			req = append(req, b)
			if ops[7]&last != 0 {
				produce(t, p, bytes.Join(req, nil), req)
				req = nil
			}
		}
		produce(t, p, bytes.Join(req, nil), req)
	})
}

// produce sends the request req to p, made of the batches, when they are known, and
// checks the answer and what the log holds after it (see FuzzProduce).
func produce(t *testing.T, p *Partition, req []byte, batches [][]byte) {
	t.Helper()
	before := p.Window().Next
	res, err := p.Produce(1, 0, req, testNow)
	if errors.Is(err, memarena.ErrFull) {
		t.Skip("the arena is full") // the partitions of earlier runs are closed: not expected
	}
	if err != nil {
		if !errors.Is(err, ErrInvalidBatch) && !errors.Is(err, ErrOutOfOrderSequence) {
			t.Fatalf("request of %d bytes refused with an unexpected error: %v", len(req), err)
		}
		if next := p.Window().Next; next != before {
			t.Fatalf("refused request (%v) appended offsets %d to %d", err, before, next-1)
		}
		return
	}
	got := logBatches(t, p, before)
	var d codec.Decompressor
	for _, b := range got {
		var it batch.Iter
		if err := d.Iter(&it, b); err != nil {
			t.Fatalf("stored a batch no consumer can read: %v", err)
		}
		for it.Next() {
		}
		if err := it.Err(); err != nil {
			t.Fatalf("stored a batch whose records no consumer can read: %v", err)
		}
	}
	if batches == nil { // raw bytes: what was appended is what was sent
		for rest := req; len(rest) > 0; {
			h, err := batch.Check(rest)
			if err != nil {
				t.Fatalf("request accepted with an invalid batch: %v", err)
			}
			batches = append(batches, rest[:h.Size()])
			rest = rest[h.Size():]
		}
	}
	if res.Appended+res.Duplicates != len(batches) || res.Appended != len(got) {
		t.Fatalf("request of %d batches: %d appended, %d duplicates; the log holds %d more", len(batches), res.Appended, res.Duplicates, len(got))
	}
	appendedBytes, i := 0, 0
	for _, b := range got {
		for i < len(batches) && !sameBatch(b, batches[i]) {
			i++
		}
		if i == len(batches) {
			t.Fatalf("the log holds a batch the request did not send, or out of order: %x", b)
		}
		appendedBytes += len(b)
		i++
	}
	next := p.Window().Next
	if res.AppendedBytes != appendedBytes || res.Next != next {
		t.Fatalf("answer %+v; the log holds %d more bytes, ends at %d", res, appendedBytes, next)
	}
	if res.Duplicates == 0 && len(batches) > 0 && (res.Base != before || res.Last != next-1) {
		t.Fatalf("request appended offsets %d to %d, answered %d to %d", before, next-1, res.Base, res.Last)
	}
	if len(batches) == 0 {
		return
	}
	for _, b := range batches {
		if h, _ := batch.ParseHeader(b); !idempotent(&h) {
			return
		}
	}
	again, err := p.Produce(1, 0, req, testNow)
	if err != nil || again.Appended != 0 || again.Duplicates != len(batches) || p.Window().Next != next {
		t.Fatalf("request of %d idempotent batches accepted (%+v), sent again: %+v, %v; the log ends at %d, was %d",
			len(batches), res, again, err, p.Window().Next, next)
	}
}

// logBatches returns the batches of p from offset from to its end, and checks that their
// offsets are dense.
func logBatches(t *testing.T, p *Partition, from int64) [][]byte {
	t.Helper()
	var out [][]byte
	var spans []memarena.Span
	for off := from; off < p.Window().Next; {
		var data []byte
		data, spans = fetchBytes(t, p, off, 1<<20, spans)
		if len(data) == 0 {
			t.Fatalf("fetch at %d below the end %d returns nothing", off, p.Window().Next)
		}
		for len(data) > 0 {
			h, err := batch.Check(data)
			if err != nil || h.BaseOffset != off {
				t.Fatalf("batch at %d: base offset %d, %v", off, h.BaseOffset, err)
			}
			out = append(out, data[:h.Size()])
			off = h.LastOffset() + 1
			data = data[h.Size():]
		}
	}
	return out
}

// sameBatch reports whether a batch read from the log is the batch sent, base offsets
// aside.
func sameBatch(stored, sent []byte) bool {
	if len(stored) != len(sent) {
		return false
	}
	s := append([]byte(nil), sent...)
	batch.SetBaseOffset(s, batch.BaseOffset(stored))
	return bytes.Equal(stored, s)
}
