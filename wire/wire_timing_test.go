package wire

import "testing"

// BenchmarkDecodeProduceHeader peeks a produce frame and decodes its header from the
// first bytes of the frame, as the broker's event loop does before copying the batches.
func BenchmarkDecodeProduceHeader(b *testing.B) {
	req := Request{Header: RequestHeader{APIKey: APIProduce, RequestID: 1},
		Body: &ProduceRequest{Topic: []byte("orders.eu-west"), Partition: 17, Version: 3, Session: 1 << 40,
			ProducerID: 99, Batches: make([]byte, 64<<10)}}
	frame := req.AppendTo(nil)
	prefix := frame[:128]
	var p ProduceRequest
	b.ReportAllocs()
	for b.Loop() {
		size, _, err := PeekFrame(prefix, DefaultMaxFrame)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.DecodeFrameHeader(prefix, size); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeFetchHeader encodes the frame of a fetch answer up to its records, as
// the broker does before sending the records with sendfile or writev.
func BenchmarkEncodeFetchHeader(b *testing.B) {
	f := FetchResponse{HighWatermark: 1 << 40, LogStartOffset: 1 << 30, Checkpoint: 1<<40 - 1}
	hdr := ResponseHeader{RequestID: 7, APIKey: APIFetch}
	buf := make([]byte, 0, FetchFrameHeaderSize)
	b.SetBytes(FetchFrameHeaderSize)
	b.ReportAllocs()
	for b.Loop() {
		buf = f.AppendFrameHeader(buf[:0], hdr, 1<<20)
	}
}

// BenchmarkDecodeFetchRequest decodes a whole fetch request frame into a reused Request.
func BenchmarkDecodeFetchRequest(b *testing.B) {
	req := Request{Header: RequestHeader{APIKey: APIFetch, RequestID: 1},
		Body: &FetchRequest{Topic: []byte("orders.eu-west"), Partition: 17, Offset: 1 << 40, MaxBytes: 1 << 20}}
	frame := req.AppendTo(nil)
	var r Request
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Decode(frame, DefaultMaxFrame); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeProduceResponse encodes a whole produce answer frame.
func BenchmarkEncodeProduceResponse(b *testing.B) {
	body := ProduceResponse{Version: 3, Session: 1 << 40, Checkpoint: 1000, BaseOffset: 1001, LastOffset: 1100}
	hdr := ResponseHeader{RequestID: 7, APIKey: APIProduce}
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		start := 0
		buf = AppendResponseHeader(buf[:0], hdr, "")
		buf = body.AppendTo(buf)
		FinishFrame(buf, start)
	}
}
