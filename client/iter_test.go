package client

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
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

// answerFrom returns the batches of data from the one holding off, as a broker answers a
// fetch at off.
func answerFrom(t testing.TB, data []byte, off int64) []byte {
	t.Helper()
	for rest := data; len(rest) > 0; {
		h, err := batch.ParseHeader(rest)
		if err != nil {
			t.Fatal(err)
		}
		if h.LastOffset() >= off {
			return rest
		}
		rest = rest[h.Size():]
	}
	return nil
}

// batchStarts returns the position in data of each batch.
func batchStarts(t testing.TB, data []byte) []int {
	t.Helper()
	var starts []int
	for pos := 0; pos < len(data); {
		h, err := batch.ParseHeader(data[pos:])
		if err != nil {
			t.Fatal(err)
		}
		starts = append(starts, pos)
		pos += h.Size()
	}
	return starts
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
		for _, from := range []int64{100, 101, 350, 599} {
			var ri recordIter
			ri.lo, ri.hi = 0, 400
			cur := cursor{next: from}
			ri.reset(answerFrom(t, data, from), &cur)
			want := from
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
			if ri.err != nil || want != max(501, from) || cur.next != 600 {
				t.Fatalf("%v from %d: stopped at %d (position %d): %v", c, from, want, cur.next, ri.err)
			}
		}
	}
}

// TestRecordIterCorrupt: a damaged batch is reported with a *BatchError, never returned,
// whether the iterator or the fetcher (verified) checked its CRC. When its CRC did not
// match, the error does not say where the batch ends (Next -1: its header cannot be
// trusted); when its records do not decode under a good CRC, it does.
func TestRecordIterCorrupt(t *testing.T) {
	data := sealAll(t, batch.CodecNone, testRecords(300), 0)
	starts := batchStarts(t, data)
	if len(starts) < 3 {
		t.Fatalf("%d batches, want 3 or more", len(starts))
	}
	second, err := batch.ParseHeader(data[starts[1]:])
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(data)
	flipped[starts[1]+batch.HeaderSize+3] ^= 1 // a byte of the second batch's records
	// The same records, sealed again under a header claiming one more: a good CRC over
	// records that end one short.
	lie := second
	lie.Count++
	resealed, err := batch.Seal(nil, lie, second.Records(data[starts[1]:]))
	if err != nil {
		t.Fatal(err)
	}
	short := slices.Concat(data[:starts[1]], resealed)
	for _, tc := range []struct {
		name string
		data []byte
		next int64
	}{
		{"a flipped bit", flipped, -1},
		{"a record short", short, second.LastOffset() + 2},
	} {
		_, verified := verifyBatches(tc.data)
		for _, v := range []int{0, verified} {
			var ri recordIter
			ri.hi = wire.LogicalPartitions - 1
			ri.topic, ri.part = "t", 3
			var cur cursor
			ri.reset(tc.data, &cur)
			ri.verified = v
			n := 0
			for ri.next() {
				n++
			}
			var be *BatchError
			if !errors.As(ri.err, &be) || !errors.Is(ri.err, batch.ErrCorrupt) || be.Topic != "t" || be.Partition != 3 ||
				be.Next != tc.next || be.Offset != cur.next || cur.next > lie.LastOffset() || n < int(second.BaseOffset) {
				t.Fatalf("%s (%d bytes verified): %d records, position %d, error %v (%+v); want a *BatchError, next %d",
					tc.name, v, n, cur.next, ri.err, be, tc.next)
			}
		}
	}
}

// TestRecordIterOffsetsDense: batches whose offsets do not continue where reading stands
// (a base offset damaged on disk: it is outside the CRC) stop the iteration with a
// *GapError naming the partition and both offsets; the records before it come out, none
// after it, and reading again from the position fails the same way.
func TestRecordIterOffsetsDense(t *testing.T) {
	good := sealAll(t, batch.CodecLZ4, testRecords(400), 0)
	starts := batchStarts(t, good)
	if len(starts) < 4 {
		t.Fatalf("%d batches, want at least 4", len(starts))
	}
	third, _ := batch.ParseHeader(good[starts[2]:])
	f := func(name string, from int64, data []byte, wantDelivered int, wantErr GapError) {
		t.Helper()
		var ri recordIter
		ri.topic, ri.part, ri.hi = "t", 3, wire.LogicalPartitions-1
		cur := cursor{next: from}
		ri.reset(data, &cur)
		n := 0
		for ri.next() {
			if ri.rec.Offset != from+int64(n) {
				t.Fatalf("%s: record %d at offset %d", name, n, ri.rec.Offset)
			}
			n++
		}
		var ge *GapError
		if !errors.As(ri.err, &ge) || *ge != wantErr || !errors.Is(ri.err, ErrOffsetGap) ||
			n != wantDelivered || cur.next != from+int64(n) {
			t.Fatalf("%s: %d records, position %d, error %v; want %d records and %+v",
				name, n, cur.next, ri.err, wantDelivered, wantErr)
		}
		if !strings.Contains(ri.err.Error(), "t/3") {
			t.Fatalf("%s: error %q does not name the partition", name, ri.err)
		}
	}
	for _, delta := range []int64{1000, -5} { // a gap, an overlap
		data := bytes.Clone(good)
		batch.SetBaseOffset(data[starts[2]:], third.BaseOffset+delta)
		want := GapError{Topic: "t", Partition: 3, Expected: third.BaseOffset,
			Base: third.BaseOffset + delta, Last: third.LastOffset() + delta}
		f(fmt.Sprint(delta), 0, data, int(third.BaseOffset), want)
		if delta > 0 {
			// Fetching again from there: the answer starts with the damaged batch. (A
			// batch shifted down still holds the offset, so only the batch after it
			// shows the overlap: the Consumer stops at the first GapError for good.)
			want.First = true
			f(fmt.Sprint(delta, " again"), third.BaseOffset, data[starts[2]:], 0, want)
		}
	}
	// The first batch of an answer must hold the offset asked for.
	f("first after", third.BaseOffset-1, good[starts[2]:], 0, GapError{Topic: "t", Partition: 3,
		Expected: third.BaseOffset - 1, Base: third.BaseOffset, Last: third.LastOffset(), First: true})
	f("first before", third.LastOffset()+1, good[starts[2]:], 0, GapError{Topic: "t", Partition: 3,
		Expected: third.LastOffset() + 1, Base: third.BaseOffset, Last: third.LastOffset(), First: true})
}

// TestRecordIterSkipOlder: a cursor started at a time passes the records at the head of
// its first batch stamped before the time, then returns everything, older or not.
func TestRecordIterSkipOlder(t *testing.T) {
	var bld batch.Builder
	bld.Reset(nil, 1, 0)
	stamps := []int64{100, 140, 200, 150, 300, 90}
	for i, ts := range stamps {
		bld.Add(uint16(i), ts, nil, []byte{byte(i)})
	}
	first := bld.Finish()
	bld.Reset(first, 1, int32(len(stamps)))
	bld.Add(0, 120, nil, []byte{byte(len(stamps))}) // older than the time, in a later batch
	data := bld.Finish()
	batch.SetBaseOffset(data, 10)
	batch.SetBaseOffset(data[len(first):], 10+int64(len(stamps)))
	f := func(from int64, want string) {
		t.Helper()
		var ri recordIter
		ri.hi = wire.LogicalPartitions - 1
		cur := cursor{next: 10, skipOlder: from, skipping: true}
		ri.reset(data, &cur)
		var got []string
		for ri.next() {
			got = append(got, fmt.Sprintf("%d@%d", ri.rec.Offset, ri.rec.Timestamp))
		}
		if s := strings.Join(got, " "); s != want || ri.err != nil || cur.next != 17 || cur.skipping {
			t.Fatalf("from %d: %s (position %d, %v), want %s", from, s, cur.next, ri.err, want)
		}
	}
	f(150, "12@200 13@150 14@300 15@90 16@120")
	f(100, "10@100 11@140 12@200 13@150 14@300 15@90 16@120")
	f(300, "14@300 15@90 16@120")
}

// FuzzRecordIter: arbitrary fetched bytes never panic the consumer's decoding, and the
// records it returns are dense from the position. Iterated again with the prefix the
// fetcher verifies (verifyBatches), the same records come out and the same error ends
// them: the fetcher's check changes where the CRC is computed, nothing a reader sees.
func FuzzRecordIter(f *testing.F) {
	f.Add(sealAll(f, batch.CodecNone, testRecords(5), 2))
	f.Add(sealAll(f, batch.CodecLZ4, testRecords(40), 0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		read := func(verified int) (offsets []int64, values [][]byte, err error) {
			var ri recordIter
			ri.hi = wire.LogicalPartitions - 1
			cur := cursor{next: 2}
			ri.reset(data, &cur)
			ri.verified = verified
			for want := int64(2); ri.next(); want++ {
				if ri.rec.Offset != want || cur.next != want+1 {
					t.Fatalf("record at %d, want %d (position %d)", ri.rec.Offset, want, cur.next)
				}
				offsets = append(offsets, ri.rec.Offset)
				values = append(values, bytes.Clone(ri.rec.Value))
			}
			return offsets, values, ri.err
		}
		offs, vals, err := read(0)
		_, verified := verifyBatches(data)
		offs2, vals2, err2 := read(verified)
		if !slices.Equal(offs, offs2) || !slices.EqualFunc(vals, vals2, bytes.Equal) || (err == nil) != (err2 == nil) ||
			(err != nil && err.Error() != err2.Error()) {
			t.Fatalf("checked in the iterator: %d records, %v; with %d bytes verified: %d records, %v",
				len(offs), err, verified, len(offs2), err2)
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

// TestBatchErrorNextNeedsCheckedBase: a batch's base offset is outside its CRC, and the
// first batch of an answer is only checked to hold the offset asked for. A *BatchError
// on it gives Next only when the batch after it starts there: a damaged base (+3 here,
// reading resumed 3 records into the batch, a review's case) would have pointed Next
// past the batch's true end, into the records of the intact batch after it.
func TestBatchErrorNextNeedsCheckedBase(t *testing.T) {
	data := sealAll(t, batch.CodecNone, testRecords(300), 0)
	starts := batchStarts(t, data)
	second, err := batch.ParseHeader(data[starts[1]:])
	if err != nil {
		t.Fatal(err)
	}
	lie := second // a good CRC over records one short of the count
	lie.Count++
	bad, err := batch.Seal(nil, lie, second.Records(data[starts[1]:]))
	if err != nil {
		t.Fatal(err)
	}
	end := second.BaseOffset + int64(lie.Count)
	// The batch after it, as the broker numbered it: its base follows the lie's count.
	third := bytes.Clone(data[starts[2]:])
	batch.SetBaseOffset(third, end)
	for _, tc := range []struct {
		shift int64
		after []byte
		next  int64
	}{
		{0, third, end},     // the next batch confirms the end
		{3, third, -1},      // the damaged base disagrees with the next batch
		{0, nil, -1},        // nothing after it in the answer: nothing confirms it
		{0, third[:20], -1}, // a cut header confirms nothing
		{3, nil, -1},
	} {
		b := bytes.Clone(bad)
		batch.SetBaseOffset(b, second.BaseOffset+tc.shift)
		var ri recordIter
		ri.hi = wire.LogicalPartitions - 1
		cur := cursor{next: second.BaseOffset + 3} // resumed after 3 records of the batch
		ri.reset(slices.Concat(b, tc.after), &cur)
		for ri.next() {
		}
		var be *BatchError
		if !errors.As(ri.err, &be) || be.Next != tc.next {
			t.Fatalf("base shifted by %d, %d bytes after it: %v (%+v), want a *BatchError with Next %d",
				tc.shift, len(tc.after), ri.err, be, tc.next)
		}
	}
}
