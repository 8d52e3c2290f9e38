package wire

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestFetchMultiFrameHeader checks the zero-copy fetch_multi layout against the
// whole-message encoder: the frame header, then each part's header and records, is the
// frame Response.AppendTo makes.
func TestFetchMultiFrameHeader(t *testing.T) {
	for _, version := range []uint16{0, 1} {
		want := sampleResponses()["fetch-multi"]
		body := want.Body.(*FetchMultiResponse)
		body.Version = version
		rest := 0
		for _, p := range body.Parts {
			rest += FetchPartHeaderLen(version) + len(p.Records)
		}
		got := body.AppendFrameHeader(nil, want.Header, len(body.Parts), rest)
		if len(got) != FetchMultiFrameHeaderSize {
			t.Fatalf("frame header of %d bytes, want %d", len(got), FetchMultiFrameHeaderSize)
		}
		for i := range body.Parts {
			n := len(got)
			got = body.Parts[i].AppendHeader(got, len(body.Parts[i].Records), version)
			if len(got)-n != FetchPartHeaderLen(version) {
				t.Fatalf("version %d: part header of %d bytes, want %d", version, len(got)-n, FetchPartHeaderLen(version))
			}
			got = append(got, body.Parts[i].Records...)
		}
		if frame := want.AppendTo(nil); !bytes.Equal(got, frame) {
			t.Fatalf("version %d: zero-copy layout\n%x\nwant\n%x", version, got, frame)
		}
	}
	// Version 2: the part table, then the records part after part.
	want := sampleFetchMulti(2)
	body := want.Body.(*FetchMultiResponse)
	rest := 0
	for _, p := range body.Parts {
		rest += FetchPartHeaderLen(2) + len(p.Records)
	}
	got := body.AppendFrameHeader(nil, want.Header, len(body.Parts), rest)
	for i := range body.Parts {
		got = body.Parts[i].AppendHeader(got, len(body.Parts[i].Records), 2)
	}
	if len(got) != FetchMultiTableSize(len(body.Parts)) {
		t.Fatalf("part table ends at %d, want %d", len(got), FetchMultiTableSize(len(body.Parts)))
	}
	for i := range body.Parts {
		got = append(got, body.Parts[i].Records...)
	}
	if frame := want.AppendTo(nil); !bytes.Equal(got, frame) {
		t.Fatalf("version 2: zero-copy layout\n%x\nwant\n%x", got, frame)
	}
}

// sampleFetchMulti is an answer of version 1 or 2: next offsets after the records, at the
// offset asked for without them, -1 with an error code.
func sampleFetchMulti(version uint16) Response {
	r := sampleResponses()["fetch-multi"]
	b := r.Body.(*FetchMultiResponse)
	b.Version = version
	b.Parts[0].NextOffset = 1003
	b.Parts[1].NextOffset = -1
	b.Parts[2].NextOffset = -1
	b.Parts[3].NextOffset = 4
	return r
}

// TestFetchMultiV1RoundTrip decodes a version 1 answer into a body set to version 1, as
// the client does, and reads the version of a request from its header.
func TestFetchMultiV1RoundTrip(t *testing.T) {
	want := sampleFetchMulti(1)
	frame := want.AppendTo(nil)
	v0r := sampleResponses()["fetch-multi"]
	if v0 := v0r.AppendTo(nil); len(frame) != len(v0)+8*4 {
		t.Fatalf("version 1 frame of %d bytes, want %d (8 more per part)", len(frame), len(v0)+8*4)
	}
	got := Response{Body: &FetchMultiResponse{Version: 1}}
	if _, err := got.Decode(frame, DefaultMaxFrame); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v\nwant %+v", got.Body, want.Body)
	}
	// Read as version 0, the same bytes do not parse: the layouts differ.
	var v0 Response
	if _, err := v0.Decode(frame, DefaultMaxFrame); err == nil {
		t.Fatal("a version 1 answer decoded as version 0")
	}

	req := Request{Header: RequestHeader{APIKey: APIFetchMulti, APIVersion: 1, RequestID: 7},
		Body: &FetchMultiRequest{Topic: []byte("t"), Partitions: []FetchMultiPartition{{Partition: 0, Offset: 5}}}}
	var r Request
	if _, err := r.Decode(req.AppendTo(nil), DefaultMaxFrame); err != nil {
		t.Fatal(err)
	}
	if v := r.Body.(*FetchMultiRequest).Version; v != 1 {
		t.Fatalf("request version %d, want 1", v)
	}
	req.Header.APIVersion = 3
	if _, err := r.Decode(req.AppendTo(nil), DefaultMaxFrame); CodeOf(err) != CodeUnsupportedVersion {
		t.Fatalf("version 3: %v, want unsupported_version", err)
	}
}

// TestFetchMultiV2RoundTrip decodes a version 2 answer (the part table first) into a body
// set to version 2: the same parts as version 1 in as many bytes, laid out otherwise.
func TestFetchMultiV2RoundTrip(t *testing.T) {
	want := sampleFetchMulti(2)
	frame := want.AppendTo(nil)
	v1r := sampleFetchMulti(1)
	v1 := v1r.AppendTo(nil)
	if len(frame) != len(v1) || bytes.Equal(frame, v1) {
		t.Fatalf("version 2 frame of %d bytes, want %d (version 1's) laid out otherwise", len(frame), len(v1))
	}
	got := Response{Body: &FetchMultiResponse{Version: 2}}
	if _, err := got.Decode(frame, DefaultMaxFrame); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v\nwant %+v", got.Body, want.Body)
	}
	// One part: versions 1 and 2 are the same bytes.
	for _, r := range []*Response{&want, &v1r} {
		b := r.Body.(*FetchMultiResponse)
		b.Parts = b.Parts[:1]
	}
	if !bytes.Equal(want.AppendTo(nil), v1r.AppendTo(nil)) {
		t.Fatal("one part: version 2 differs from version 1")
	}
}

// TestFetchMultiPeekNextOffsets reads the part table of an answer before its records:
// every part of version 2, the one part of version 1, and refuses a table it does not
// have whole, a part with an error code, or a count other than asked.
func TestFetchMultiPeekNextOffsets(t *testing.T) {
	peek := func(frame []byte, k int) ([]PartNext, bool) {
		_, hdr, err := PeekResponse(frame, DefaultMaxFrame)
		if err != nil && !errors.Is(err, ErrShort) {
			t.Fatal(err)
		}
		return PeekNextOffsets(hdr, frame[ResponseHeaderSize:], k, nil)
	}
	r := sampleFetchMulti(2)
	b := r.Body.(*FetchMultiResponse)
	b.Parts = append(b.Parts[:1], b.Parts[3]) // the two parts with code none
	frame := r.AppendTo(nil)
	size := FetchMultiTableSize(2)
	want := []PartNext{{Partition: b.Parts[0].Partition, NextOffset: 1003, RecordsLen: uint32(len(b.Parts[0].Records))},
		{Partition: b.Parts[1].Partition, NextOffset: 4}}
	if got, ok := peek(frame[:size], 2); !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("PeekNextOffsets = %+v, %v; want %+v, true", got, ok, want)
	}
	if _, ok := peek(frame[:size-1], 2); ok {
		t.Fatal("PeekNextOffsets read a part table it did not have whole")
	}
	if _, ok := peek(frame, 3); ok {
		t.Fatal("PeekNextOffsets read a table of 2 parts as 3")
	}
	r = sampleFetchMulti(2)
	if _, ok := peek(r.AppendTo(nil), 4); ok {
		t.Fatal("PeekNextOffsets took the next offsets of a table with error codes")
	}
	r = sampleFetchMulti(1)
	b = r.Body.(*FetchMultiResponse)
	b.Parts = b.Parts[:1]
	if got, ok := peek(r.AppendTo(nil)[:FetchMultiTableSize(1)], 1); !ok || got[0].NextOffset != 1003 {
		t.Fatalf("version 1, one part: PeekNextOffsets = %+v, %v; want 1003, true", got, ok)
	}
}

// TestFetchMultiV1Malformed checks the next offset of version 1 and 2 parts.
func TestFetchMultiV1Malformed(t *testing.T) {
	for _, version := range []uint16{1, 2} {
		testNextMalformed(t, version)
	}
}

func testNextMalformed(t *testing.T, version uint16) {
	for name, set := range map[string]func(b *FetchMultiResponse){
		"negative without records": func(b *FetchMultiResponse) { b.Parts[3].NextOffset = -1 },
		"set with an error code":   func(b *FetchMultiResponse) { b.Parts[1].NextOffset = 7 },
		"zero after records":       func(b *FetchMultiResponse) { b.Parts[0].NextOffset = 0 },
		"past the high watermark":  func(b *FetchMultiResponse) { b.Parts[0].NextOffset = 1004 },
	} {
		r := sampleFetchMulti(version)
		set(r.Body.(*FetchMultiResponse))
		got := Response{Body: &FetchMultiResponse{Version: version}}
		frame := r.AppendTo(nil)
		if _, err := got.Decode(frame, DefaultMaxFrame); !errors.Is(err, ErrMalformed) {
			t.Errorf("version %d, %s: %v, want malformed", version, name, err)
		}
	}
}

// FuzzDecodeFetchMultiV1 feeds arbitrary bodies to a version 1 fetch_multi decoder:
// an error or a body that encodes back to the same bytes, never a panic.
func FuzzDecodeFetchMultiV1(f *testing.F) {
	fuzzFetchMulti(f, 1)
}

// FuzzDecodeFetchMultiV2 is FuzzDecodeFetchMultiV1 for version 2 (the part table first),
// with the part table peeked too.
func FuzzDecodeFetchMultiV2(f *testing.F) {
	fuzzFetchMulti(f, 2)
}

func fuzzFetchMulti(f *testing.F, version uint16) {
	r := sampleFetchMulti(version)
	f.Add(r.Body.AppendTo(nil))
	f.Add([]byte{1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		hdr := ResponseHeader{APIKey: APIFetchMulti}
		for k := 1; k <= 4; k++ { // never panics, whatever the bytes
			if len(data) >= 2 {
				PeekNextOffsets(hdr, data[2:], k, nil)
			}
			PeekNextOffsets(hdr, append([]byte{0, 0}, data...), k, nil)
		}
		b := FetchMultiResponse{Version: version}
		rest, err := b.Decode(data)
		if err != nil {
			requireTyped(t, err)
			return
		}
		if again := b.AppendTo(nil); !bytes.Equal(again, data[:len(data)-len(rest)]) {
			t.Fatalf("re-encoded\n%x\nwant\n%x", again, data[:len(data)-len(rest)])
		}
	})
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

// TestFetchMultiRepeatedPartition: a request listing a partition twice is malformed, by
// either path of the check (pairs for a few partitions, a bitmap for many), and distinct
// partitions are not, ids beyond any topic's included.
func TestFetchMultiRepeatedPartition(t *testing.T) {
	for _, n := range []int{2, 32, 33, MaxFetchPartitions} {
		req := FetchMultiRequest{Topic: []byte("t")}
		for i := range n {
			req.Partitions = append(req.Partitions, FetchMultiPartition{Partition: uint32(i) * 16})
		}
		req.Partitions[n-1].Partition = 1<<32 - 1 // beyond MaxPartitions: not in the bitmap
		var got FetchMultiRequest
		if _, err := got.Decode(req.AppendTo(nil)); err != nil {
			t.Fatalf("%d distinct partitions: %v", n, err)
		}
		req.Partitions[n-1].Partition = req.Partitions[n/2-1].Partition
		_, err := got.Decode(req.AppendTo(nil))
		if CodeOf(err) != CodeMalformed || !strings.Contains(err.Error(), "listed twice") {
			t.Fatalf("%d partitions, one twice: %v", n, err)
		}
	}
}
