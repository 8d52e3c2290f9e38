package client

import (
	"testing"

	"sluice/batch"
	"sluice/codec"
	"sluice/wire"
)

// fetchFrame returns a fetch response frame holding about size bytes of batches of
// 1 KiB records (64 per batch), with offsets set, and the number of records.
func fetchFrame(tb testing.TB, size int, c batch.Codec) ([]byte, int) {
	var comp codec.Compressor
	var bld batch.Builder
	var records []byte
	value := make([]byte, 1<<10)
	for i := range value {
		value[i] = byte(i * 7 / 5)
	}
	n := 0
	for len(records) < size {
		start := len(records)
		bld.Reset(records, 9, int32(n))
		for range 64 {
			bld.Add(uint16(n), 1_700_000_000_000+int64(n), nil, value)
			n++
		}
		records = comp.Finish(&bld, c)
		batch.SetBaseOffset(records[start:], int64(n-64))
	}
	resp := wire.Response{Header: wire.ResponseHeader{RequestID: 1, APIKey: wire.APIFetch},
		Body: &wire.FetchResponse{HighWatermark: int64(n), Checkpoint: int64(n - 1), Records: records}}
	return resp.AppendTo(nil), n
}

// BenchmarkConsumerDecode decodes a 4 MiB fetch answer of 1 KiB records: the frame, each
// batch's header and CRC, each record, as Consumer.Poll and Next do once the bytes are
// read. The goal is 1 GB/s on one core with no allocation per record.
func BenchmarkConsumerDecode(b *testing.B) {
	for _, c := range []batch.Codec{batch.CodecNone, batch.CodecLZ4} {
		b.Run(c.String(), func(b *testing.B) {
			frame, n := fetchFrame(b, 4<<20, c)
			var resp wire.Response
			var ri recordIter
			ri.hi = wire.LogicalPartitions - 1
			b.SetBytes(int64(n) << 10)
			b.ReportAllocs()
			sum, cur := 0, new(cursor)
			for b.Loop() {
				if _, err := resp.Decode(frame, wire.DefaultMaxFrame); err != nil {
					b.Fatal(err)
				}
				cur.next = 0
				ri.reset(resp.Body.(*wire.FetchResponse).Records, cur)
				for ri.next() {
					sum += len(ri.rec.Value)
				}
				if ri.err != nil || cur.next != int64(n) {
					b.Fatalf("decoded to %d of %d: %v", cur.next, n, ri.err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// TestDecodeAllocs checks that iterating a fetch answer allocates nothing once warm.
func TestDecodeAllocs(t *testing.T) {
	frame, n := fetchFrame(t, 1<<20, batch.CodecNone)
	var resp wire.Response
	var ri recordIter
	ri.hi = wire.LogicalPartitions - 1
	cur := new(cursor) // a partition's position, as in Consumer
	allocs := testing.AllocsPerRun(20, func() {
		resp.Decode(frame, wire.DefaultMaxFrame)
		cur.next = 0
		ri.reset(resp.Body.(*wire.FetchResponse).Records, cur)
		for ri.next() {
		}
		if cur.next != int64(n) {
			t.Fatalf("decoded to %d of %d: %v", cur.next, n, ri.err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per fetch answer of %d records", allocs, n)
	}
}
