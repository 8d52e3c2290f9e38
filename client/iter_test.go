package client

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"testing/iotest"

	"sluice/batch"
	"sluice/wire"
)

// sealAll builds the batches of records through a window with codec c, as a producer
// does, sets their offsets from base as a broker does, and returns them back to back.
func sealAll(t testing.TB, c batch.Codec, recs []Record, base int64) []byte {
	sh := &winShared{codec: c, batchBytes: 16 << 10, requestBytes: 16 << 10, maxInflight: 1, newPID: newPID}
	w := newWindow(sh, 0, 1, 7)
	for i := range recs {
		w.add(&recs[i], uint16(i), 1000+int64(i), 0)
	}
	w.seal()
	var out []byte
	for _, b := range w.q {
		batch.SetBaseOffset(b.buf, base)
		base += int64(b.count)
		out = append(out, b.buf...)
	}
	return out
}

func testRecords(n int) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Key: []byte(fmt.Sprintf("k%d", i%10)), Value: bytes.Repeat([]byte(fmt.Sprintf("value %d;", i)), 20)}
		if i%3 == 0 {
			recs[i].Headers = []batch.RecordHeader{{Key: []byte("h"), Value: []byte{byte(i)}}}
		}
	}
	return recs
}

// TestCodecRoundTrip: records sealed with each codec read back the same, from any
// position, with the logical filter applied.
func TestCodecRoundTrip(t *testing.T) {
	recs := testRecords(500)
	for _, c := range []batch.Codec{batch.CodecNone, batch.CodecZstd, batch.CodecS2, batch.CodecLZ4} {
		data := sealAll(t, c, recs, 100)
		if h, _ := batch.ParseHeader(data); h.Codec != c {
			t.Fatalf("%v: first batch stored with %v", c, h.Codec)
		}
		for _, from := range []int64{0, 100, 101, 350, 599, 600} {
			var ri recordIter
			ri.lo, ri.hi = 0, 400
			pos := from
			ri.reset(data, &pos)
			want := max(from, 100)
			for ri.next() {
				r := ri.rec
				i := int(r.Offset - 100)
				if r.Offset != want || !bytes.Equal(r.Value, recs[i].Value) || string(r.Key) != string(recs[i].Key) ||
					r.Timestamp != 1000+int64(i) || int(r.Logical) != i || (i%3 == 0) != hasHeaders(r) {
					t.Fatalf("%v from %d: record at %d is %+v, want offset %d", c, from, r.Offset, r, want)
				}
				want++
			}
			// The logical filter [0, 400] stops the records at offset 500; the position
			// still passes every record.
			if ri.err != nil || want != max(501, from) || pos != max(600, from) {
				t.Fatalf("%v from %d: stopped at %d (position %d): %v", c, from, want, pos, ri.err)
			}
		}
	}
}

// TestRecordIterCorrupt: a damaged batch is reported, never returned.
func TestRecordIterCorrupt(t *testing.T) {
	data := sealAll(t, batch.CodecNone, testRecords(50), 0)
	data[len(data)/2] ^= 1
	var ri recordIter
	ri.hi = wire.LogicalPartitions - 1
	pos := int64(0)
	ri.reset(data, &pos)
	for ri.next() {
	}
	if ri.err == nil {
		t.Fatal("corrupt batch read without error")
	}
}

// FuzzRecordIter: arbitrary fetched bytes never panic the consumer's decoding, and every
// record it returns is at or after the position.
func FuzzRecordIter(f *testing.F) {
	f.Add(sealAll(f, batch.CodecNone, testRecords(5), 3))
	f.Add(sealAll(f, batch.CodecLZ4, testRecords(40), 0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var ri recordIter
		ri.hi = wire.LogicalPartitions - 1
		pos := int64(2)
		ri.reset(data, &pos)
		for ri.next() {
			if ri.rec.Offset < 2 || ri.rec.Offset >= pos+1 {
				t.Fatalf("record at %d, position %d", ri.rec.Offset, pos)
			}
		}
	})
}

// TestFrameReader: frames arriving a byte at a time, several per read, and larger than
// the initial buffer all come out whole.
func TestFrameReader(t *testing.T) {
	var stream []byte
	var sizes []int
	for _, n := range []int{0, 10, 200 << 10, 3, 70 << 10} {
		r := wire.Response{Header: wire.ResponseHeader{RequestID: uint32(n), APIKey: wire.APIFetch},
			Body: &wire.FetchResponse{HighWatermark: 1, Checkpoint: -1, Records: make([]byte, n)}}
		before := len(stream)
		stream = r.AppendTo(stream)
		sizes = append(sizes, len(stream)-before)
	}
	for name, rd := range map[string]io.Reader{"whole": bytes.NewReader(stream),
		"bytes": iotest.OneByteReader(bytes.NewReader(stream)), "halves": iotest.HalfReader(bytes.NewReader(stream))} {
		fr := frameReader{r: rd, maxFrame: wire.DefaultMaxFrame}
		for i, size := range sizes {
			frame, err := fr.next()
			if err != nil || len(frame) != size {
				t.Fatalf("%s: frame %d: %d bytes, want %d: %v", name, i, len(frame), size, err)
			}
		}
		if _, err := fr.next(); err == nil {
			t.Fatalf("%s: a frame after the end", name)
		}
	}
}

func hasHeaders(r *batch.Record) bool {
	hi := r.HeaderIter()
	return hi.Len() > 0
}
