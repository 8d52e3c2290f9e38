package wire

import (
	"bytes"
	"testing"
)

// TestFetchMultiFrameHeader checks the zero-copy fetch_multi layout against the
// whole-message encoder: the frame header, then each part's header and records, is the
// frame Response.AppendTo makes.
func TestFetchMultiFrameHeader(t *testing.T) {
	want := sampleResponses()["fetch-multi"]
	body := want.Body.(*FetchMultiResponse)
	rest := 0
	for _, p := range body.Parts {
		rest += FetchPartHeaderSize + len(p.Records)
	}
	got := body.AppendFrameHeader(nil, want.Header, len(body.Parts), rest)
	if len(got) != FetchMultiFrameHeaderSize {
		t.Fatalf("frame header of %d bytes, want %d", len(got), FetchMultiFrameHeaderSize)
	}
	for i := range body.Parts {
		n := len(got)
		got = body.Parts[i].AppendHeader(got, len(body.Parts[i].Records))
		if len(got)-n != FetchPartHeaderSize {
			t.Fatalf("part header of %d bytes, want %d", len(got)-n, FetchPartHeaderSize)
		}
		got = append(got, body.Parts[i].Records...)
	}
	if frame := want.AppendTo(nil); !bytes.Equal(got, frame) {
		t.Fatalf("zero-copy layout\n%x\nwant\n%x", got, frame)
	}
}

// TestFetchMultiMalformed checks that bad fetch_multi bodies get malformed, never a
// panic: no partitions, too many, a negative offset, records with an error code, an
// unknown code, offsets out of order.
func TestFetchMultiMalformed(t *testing.T) {
	req := func(b *FetchMultiRequest) []byte {
		return (&Request{Header: RequestHeader{APIKey: APIFetchMulti}, Body: b}).AppendTo(nil)
	}
	resp := func(parts ...FetchPart) []byte {
		r := Response{Header: ResponseHeader{APIKey: APIFetchMulti}, Body: &FetchMultiResponse{Parts: parts}}
		return r.AppendTo(nil)
	}
	tooMany := make([]FetchMultiPartition, MaxFetchPartitions+1)
	for name, frame := range map[string][]byte{
		"no partitions":   req(&FetchMultiRequest{Topic: []byte("t")}),
		"too many":        req(&FetchMultiRequest{Topic: []byte("t"), Partitions: tooMany}),
		"negative offset": req(&FetchMultiRequest{Topic: []byte("t"), Partitions: []FetchMultiPartition{{Offset: -1}}}),
		"count past end":  patch32(req(&FetchMultiRequest{Topic: []byte("t"), Partitions: []FetchMultiPartition{{}}}), RequestHeaderSize+2+1+8, 2),
	} {
		var r Request
		_, err := r.Decode(frame, DefaultMaxFrame)
		requireCode(t, err, CodeMalformed)
		if t.Failed() {
			t.Fatalf("%s", name)
		}
	}
	for name, frame := range map[string][]byte{
		"records with an error": resp(FetchPart{Code: CodeNotServing, HighWatermark: 3, Checkpoint: -1, Records: []byte{1}}),
		"unknown code":          resp(FetchPart{Code: 999, Checkpoint: -1}),
		"fatal code":            resp(FetchPart{Code: CodeMalformed, Checkpoint: -1}),
		"offsets out of order":  resp(FetchPart{HighWatermark: 1, LogStartOffset: 2, Checkpoint: -1}),
	} {
		var r Response
		_, err := r.Decode(frame, DefaultMaxFrame)
		requireCode(t, err, CodeMalformed)
		if t.Failed() {
			t.Fatalf("%s", name)
		}
	}
}
