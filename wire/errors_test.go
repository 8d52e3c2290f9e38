package wire

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"sluice/batch"
)

// TestShortPrefixes decodes every proper prefix of every sample frame: each must ask for
// more bytes, never fail otherwise or panic, and a request's header must be reported as
// soon as it is there.
func TestShortPrefixes(t *testing.T) {
	for name, r := range sampleRequests() {
		frame := r.AppendTo(nil)
		for n := range len(frame) {
			var got Request
			if _, err := got.Decode(frame[:n], DefaultMaxFrame); err != ErrShort {
				t.Fatalf("%s: prefix of %d/%d bytes: %v", name, n, len(frame), err)
			}
			if n >= RequestHeaderSize && got.Header != r.Header {
				t.Fatalf("%s: prefix of %d: header %+v", name, n, got.Header)
			}
			size, _, err := PeekFrame(frame[:n], DefaultMaxFrame)
			if n < RequestHeaderSize && (err != ErrShort || size != RequestHeaderSize) ||
				n >= RequestHeaderSize && (err != nil || size != len(frame)) {
				t.Fatalf("%s: PeekFrame of %d bytes: size %d, %v", name, n, size, err)
			}
		}
	}
	for name, r := range sampleResponses() {
		frame := r.AppendTo(nil)
		for n := range len(frame) {
			var got Response
			if _, err := got.Decode(frame[:n], DefaultMaxFrame); err != ErrShort {
				t.Fatalf("%s: prefix of %d/%d bytes: %v", name, n, len(frame), err)
			}
		}
	}
}

// TestTruncatedBodies shortens the length field of every sample frame, so that the frame
// is whole but its body is cut at every position: each must be malformed (or, for a cut
// topic name that is still a valid name, refused by a later check), never ErrShort.
func TestTruncatedBodies(t *testing.T) {
	for name, r := range sampleRequests() {
		frame := r.AppendTo(nil)
		for n := RequestHeaderSize; n < len(frame); n++ {
			cut := patch32(frame[:n], 0, uint32(n-4))
			var got Request
			_, err := got.Decode(cut, DefaultMaxFrame)
			if err == nil || errors.Is(err, ErrShort) {
				t.Fatalf("%s: body cut to %d bytes: %v", name, n-RequestHeaderSize, err)
			}
			requireTyped(t, err)
		}
	}
	for name, r := range sampleResponses() {
		frame := r.AppendTo(nil)
		for n := ResponseHeaderSize; n < len(frame); n++ {
			var got Response
			_, err := got.Decode(patch32(frame[:n], 0, uint32(n-4)), DefaultMaxFrame)
			if n == ResponseHeaderSize+2+len(r.Text) && r.Header.Code != CodeNone {
				if err != nil || got.Body != nil { // an error answer without its body is valid
					t.Fatalf("%s: body dropped: %v, %+v", name, err, got.Body)
				}
				continue
			}
			if err == nil || errors.Is(err, ErrShort) {
				t.Fatalf("%s: cut to %d bytes: %v", name, n, err)
			}
		}
	}
}

// TestTrailingBytes lengthens every sample request by a byte: the body no longer fills
// the frame, which is malformed.
func TestTrailingBytes(t *testing.T) {
	for name, r := range sampleRequests() {
		frame := r.AppendTo(nil)
		frame = append(patch32(frame, 0, uint32(len(frame)-3)), 0)
		var got Request
		_, err := got.Decode(frame, DefaultMaxFrame)
		requireCode(t, err, CodeMalformed)
		if !strings.Contains(err.Error(), "after the") {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// TestFrameLimits checks the length field before anything else: frames over the limit,
// lengths near 2^32, lengths too short for a header.
func TestFrameLimits(t *testing.T) {
	valid := sampleRequests()["fetch"]
	frame := valid.AppendTo(nil)
	check := func(length uint32, maxFrame int, want Code) {
		t.Helper()
		b := patch32(frame, 0, length)
		size, hdr, err := PeekFrame(b, maxFrame)
		if hdr != valid.Header {
			t.Fatalf("length %d: header %+v", length, hdr)
		}
		if want == CodeNone {
			if err != nil || size != int(length)+4 {
				t.Fatalf("length %d, limit %d: size %d, %v", length, maxFrame, size, err)
			}
			return
		}
		requireCode(t, err, want)
		_, _, err = PeekResponse(b, maxFrame)
		requireCode(t, err, want)
	}
	check(math.MaxUint32, DefaultMaxFrame, CodeFrameTooLarge)
	check(math.MaxUint32, math.MaxInt, CodeNone) // 2^32+3 does not overflow an int
	check(math.MaxUint32-3, math.MaxInt, CodeNone)
	check(DefaultMaxFrame-4, DefaultMaxFrame, CodeNone)
	check(DefaultMaxFrame-3, DefaultMaxFrame, CodeFrameTooLarge)
	check(uint32(len(frame)-4), len(frame)-1, CodeFrameTooLarge)
	check(uint32(len(frame)-4), 0, CodeFrameTooLarge)
	check(uint32(len(frame)-4), -1, CodeFrameTooLarge)
	check(RequestHeaderSize-4, DefaultMaxFrame, CodeNone)
	check(RequestHeaderSize-5, DefaultMaxFrame, CodeMalformed)
	check(0, DefaultMaxFrame, CodeMalformed)

	var r Request // a huge frame is refused from its first 12 bytes, without waiting for it
	_, err := r.Decode(patch32(frame[:RequestHeaderSize], 0, 1<<30), DefaultMaxFrame)
	requireCode(t, err, CodeFrameTooLarge)
	if !errors.Is(err, ErrFrameTooLarge) || r.Header != valid.Header {
		t.Fatalf("%v, header %+v", err, r.Header)
	}
	// ... and from its length field alone, with a zero header.
	for n := 4; n < RequestHeaderSize; n++ {
		for length, want := range map[uint32]Code{1 << 30: CodeFrameTooLarge, 7: CodeMalformed} {
			b := patch32(frame, 0, length)[:n]
			size, hdr, err := PeekFrame(b, DefaultMaxFrame)
			requireCode(t, err, want)
			_, rhdr, rerr := PeekResponse(b, DefaultMaxFrame)
			requireCode(t, rerr, want)
			if size != 0 || hdr != (RequestHeader{}) || rhdr != (ResponseHeader{}) {
				t.Fatalf("%d bytes: size %d, headers %+v %+v", n, size, hdr, rhdr)
			}
		}
	}
}

// TestUnknownAPIAndVersion checks the API key and version against the table.
func TestUnknownAPIAndVersion(t *testing.T) {
	frame := func(key APIKey, version uint16) []byte {
		r := Request{Header: RequestHeader{APIKey: APIFetch, APIVersion: version, RequestID: 5},
			Body: &FetchRequest{Topic: []byte("t")}}
		b := r.AppendTo(nil)
		le.PutUint16(b[4:], uint16(key))
		return b
	}
	for _, c := range []struct {
		key     APIKey
		version uint16
		want    Code
	}{
		{APIFetch, 0, CodeNone},
		{APIFetch, 1, CodeUnsupportedVersion},
		{APIFetch, math.MaxUint16, CodeUnsupportedVersion},
		{APIKey(len(apis)), 0, CodeUnknownAPI},
		{math.MaxUint16, 0, CodeUnknownAPI},
	} {
		b := frame(c.key, c.version)
		size, hdr, err := PeekFrame(b, DefaultMaxFrame)
		if size != len(b) || hdr.APIKey != c.key || hdr.APIVersion != c.version || hdr.RequestID != 5 {
			t.Fatalf("%v v%d: size %d, header %+v", c.key, c.version, size, hdr)
		}
		var r Request
		_, derr := r.Decode(b, DefaultMaxFrame)
		if c.want == CodeNone {
			if err != nil || derr != nil {
				t.Fatalf("%v v%d: %v, %v", c.key, c.version, err, derr)
			}
			continue
		}
		requireCode(t, err, c.want)
		requireCode(t, derr, c.want)
	}
}

// TestBadTopicNames puts invalid names in every request that carries one.
func TestBadTopicNames(t *testing.T) {
	bad := []string{"", strings.Repeat("a", MaxTopicLen+1), ".", "..", "a b", "a/b", "é", "a\x00", "tab\t"}
	for _, name := range bad {
		bodies := []Body{
			&ProduceRequest{Topic: []byte(name)},
			&FetchRequest{Topic: []byte(name)},
			&MetadataRequest{Topics: []string{"ok", name}},
			&CreateTopicRequest{Name: name, Partitions: 1},
			&DescribeTopicRequest{Name: name},
			&ListOffsetsRequest{Topic: []byte(name)},
		}
		for _, body := range bodies {
			r := Request{Header: RequestHeader{APIKey: body.Key()}, Body: body}
			var got Request
			_, err := got.Decode(r.AppendTo(nil), DefaultMaxFrame)
			requireCode(t, err, CodeInvalidTopic)
			if !errors.Is(err, ErrInvalidTopic) {
				t.Fatalf("%q in %v: %v", name, body.Key(), err)
			}
		}
		requireCode(t, CheckTopicName(name), CodeInvalidTopic)
	}
	for _, name := range []string{"a", "...", ".a", "A-Z_0.9", longTopic} {
		if err := CheckTopicName(name); err != nil {
			t.Fatalf("%q: %v", name, err)
		}
	}
}

// TestBadRequestValues checks the value rules of each request body: counts that cannot
// fit or overflow, out-of-range partition counts and options, negative offsets.
func TestBadRequestValues(t *testing.T) {
	reqs := sampleRequests()
	reqFrame := func(name string, edit func(Body)) []byte {
		r := reqs[name]
		edit(r.Body)
		return r.AppendTo(nil)
	}
	cases := []struct {
		name  string
		frame []byte
		want  Code
	}{
		{"batches length over the frame", patch32(reqFrame("produce-empty", func(Body) {}), RequestHeaderSize+2+1+28, math.MaxUint32), CodeMalformed},
		{"metadata count 2^32-1", patch32(reqFrame("metadata-some", func(Body) {}), RequestHeaderSize, math.MaxUint32), CodeMalformed},
		{"metadata count one too many", patch32(reqFrame("metadata-some", func(Body) {}), RequestHeaderSize, 4), CodeMalformed},
		{"negative fetch offset", reqFrame("fetch", func(b Body) { b.(*FetchRequest).Offset = -1 }), CodeMalformed},
		{"list_offsets timestamp -3", reqFrame("list-offsets", func(b Body) { b.(*ListOffsetsRequest).Timestamp = -3 }), CodeMalformed},
		{"zero partitions", reqFrame("create", func(b Body) { b.(*CreateTopicRequest).Partitions = 0 }), CodeInvalidConfig},
		{"too many partitions", reqFrame("create", func(b Body) { b.(*CreateTopicRequest).Partitions = MaxPartitions + 1 }), CodeInvalidConfig},
		{"retention -2", reqFrame("create", func(b Body) { b.(*CreateTopicRequest).Options.RetentionMs = -2 }), CodeInvalidConfig},
		{"retention bytes -2", reqFrame("create", func(b Body) { b.(*CreateTopicRequest).Options.RetentionBytes = -2 }), CodeInvalidConfig},
		{"segment bytes -1", reqFrame("create", func(b Body) { b.(*CreateTopicRequest).Options.SegmentBytes = -1 }), CodeInvalidConfig},
		{"segment ms min", reqFrame("create", func(b Body) { b.(*CreateTopicRequest).Options.SegmentMs = math.MinInt64 }), CodeInvalidConfig},
		// Millisecond options a time.Duration cannot hold: they overflowed in the broker.
		{"segment ms over a duration", reqFrame("create", func(b Body) { b.(*CreateTopicRequest).Options.SegmentMs = MaxTopicMs + 1 }), CodeInvalidConfig},
		{"retention ms over a duration", reqFrame("create", func(b Body) { b.(*CreateTopicRequest).Options.RetentionMs = math.MaxInt64 }), CodeInvalidConfig},
	}
	for _, c := range cases {
		var r Request
		_, err := r.Decode(c.frame, DefaultMaxFrame)
		if CodeOf(err) != c.want {
			t.Fatalf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// TestTopicMsBound: the largest millisecond option is valid and is a duration that does
// not overflow; one more is not.
func TestTopicMsBound(t *testing.T) {
	ms := int64(MaxTopicMs)
	if d := time.Duration(ms) * time.Millisecond; d <= 0 || int64(d/time.Millisecond) != ms {
		t.Fatalf("MaxTopicMs %d ms overflows a duration: %v", ms, d)
	}
	if d := time.Duration(ms+1) * time.Millisecond; int64(d/time.Millisecond) == ms+1 {
		t.Fatalf("MaxTopicMs+1 ms fits a duration: MaxTopicMs is not the largest")
	}
	o := TopicOptions{RetentionMs: MaxTopicMs, SegmentMs: MaxTopicMs}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestResponseErrText: the error of an answer carries its text once, also from a broker
// that sent a whole "wire: <code>: <message>" string as the text; a prefix naming another
// code is part of the message.
func TestResponseErrText(t *testing.T) {
	f := func(code Code, text, want string) {
		t.Helper()
		r := Response{Header: ResponseHeader{APIKey: APIDescribeTopic, Code: code}, Text: text}
		if got := r.Err().Error(); got != want {
			t.Fatalf("Err() of %v with text %q = %q, want %q", code, text, got, want)
		}
	}
	f(CodeUnknownTopic, "wire: unknown_topic: unknown topic x", "wire: unknown_topic: unknown topic x")
	f(CodeUnknownTopic, "unknown topic x", "wire: unknown_topic: unknown topic x")
	f(CodeUnknownTopic, "", "wire: unknown_topic: unknown topic")
	f(CodeUnknownTopic, "wire: unknown_topic: ", "wire: unknown_topic: unknown topic")
	f(CodeNotServing, "wire: unknown_topic: x", "wire: not_serving: wire: unknown_topic: x")
}

// TestBadResponseValues is TestBadRequestValues for responses: offsets out of order,
// inconsistent partitions, bodies where none may be or missing where one must be.
func TestBadResponseValues(t *testing.T) {
	resps := sampleResponses()
	respFrame := func(name string, edit func(Body)) []byte {
		r := resps[name]
		edit(r.Body)
		return r.AppendTo(nil)
	}
	meta := func(edit func(*Topic)) []byte {
		return respFrame("metadata", func(b Body) { edit(&b.(*MetadataResponse).Topics[1]) })
	}
	bad := map[string][]byte{
		"checkpoint -2":        respFrame("produce", func(b Body) { b.(*ProduceResponse).Checkpoint = -2 }),
		"last below base":      respFrame("produce", func(b Body) { b.(*ProduceResponse).LastOffset = 99 }),
		"base -1, last 5":      respFrame("produce-empty", func(b Body) { b.(*ProduceResponse).LastOffset = 5 }),
		"log start over hw":    respFrame("fetch", func(b Body) { b.(*FetchResponse).LogStartOffset = 1004 }),
		"checkpoint at hw":     respFrame("fetch", func(b Body) { b.(*FetchResponse).Checkpoint = 1003 }),
		"records over frame":   patch32(respFrame("fetch-empty", func(Body) {}), FetchFrameHeaderSize-4, 1),
		"partition id":         meta(func(tp *Topic) { tp.Partitions[1].ID = 2 }),
		"partition range":      meta(func(tp *Topic) { tp.Partitions[1].Hi++ }),
		"no partitions":        meta(func(tp *Topic) { tp.Partitions = nil }),
		"topic name":           meta(func(tp *Topic) { tp.Name = "a b" }),
		"describe offsets":     respFrame("describe", func(b Body) { b.(*DescribeTopicResponse).Partitions[1].NextOffset = 4 }),
		"describe options":     respFrame("describe", func(b Body) { b.(*DescribeTopicResponse).Options.SegmentBytes = -1 }),
		"offset over hw":       respFrame("list-offsets", func(b Body) { b.(*ListOffsetsResponse).Offset = 1004 }),
		"offset below start":   respFrame("list-offsets", func(b Body) { b.(*ListOffsetsResponse).Offset = 999 }),
		"success without body": (&Response{Header: ResponseHeader{APIKey: APIFetch, Code: CodeTimeout}}).AppendTo(nil),
	}
	le.PutUint16(bad["success without body"][10:], 0)
	bad["fatal with body"] = append(patch32(bad["success without body"], 0, 11), 0)
	le.PutUint16(bad["fatal with body"][10:], uint16(CodeMalformed))
	bad["unknown api with body"] = respFrame("fetch-out-of-range", func(Body) {})
	le.PutUint16(bad["unknown api with body"][8:], 99)
	for name, frame := range bad {
		var r Response
		_, err := r.Decode(frame, DefaultMaxFrame)
		if err == nil || CodeOf(err) == CodeNone || errors.Is(err, ErrShort) {
			t.Fatalf("%s: %v", name, err)
		}
		requireTyped(t, err)
	}
}

// TestDecodeFrameHeaderErrors covers the produce header decoder's own checks: a frame too
// small for a produce header, a topic name running past the frame, a batches length that
// disagrees with the frame size.
func TestDecodeFrameHeaderErrors(t *testing.T) {
	r := sampleRequests()["produce"]
	frame := r.AppendTo(nil)
	var p ProduceRequest
	for _, size := range []int{-1, 0, RequestHeaderSize, RequestHeaderSize + 1} {
		if _, err := p.DecodeFrameHeader(frame, size); CodeOf(err) != CodeMalformed {
			t.Fatalf("size %d: %v", size, err)
		}
	}
	long := append([]byte(nil), frame...)
	le.PutUint16(long[RequestHeaderSize:], math.MaxUint16)
	if _, err := p.DecodeFrameHeader(long, 100); CodeOf(err) != CodeMalformed {
		t.Fatalf("topic past the frame: %v", err)
	}
	if off, err := p.DecodeFrameHeader(long[:20], len(long)+1<<16); err != ErrShort || off != RequestHeaderSize+2+math.MaxUint16+produceFixed {
		t.Fatalf("long topic: need %d, %v", off, err)
	}
	if _, err := p.DecodeFrameHeader(frame, len(frame)-1); CodeOf(err) != CodeMalformed {
		t.Fatalf("batches length disagrees: %v", err)
	}
}

// TestCodeOf maps errors to the codes a broker answers.
func TestCodeOf(t *testing.T) {
	_, corrupt := batch.ParseHeader(make([]byte, batch.HeaderSize))
	for err, want := range map[error]Code{
		nil:                    CodeNone,
		ErrShort:               CodeMalformed,
		NewError(CodeBusy, ""): CodeBusy,
		fmt.Errorf("cannot append: %w", NewError(CodeVersionMismatch, "V 3")): CodeVersionMismatch,
		corrupt:                          CodeUnsupportedMagic,
		&batch.CorruptError{Reason: "x"}: CodeCorruptBatch,
		&batch.CorruptError{Err: batch.ErrUnknownCodec}: CodeUnknownCodec,
		batch.ErrShort:             CodeCorruptBatch,
		errors.New("disk on fire"): CodeInternal,
	} {
		if got := CodeOf(err); got != want {
			t.Errorf("CodeOf(%v) = %v, want %v", err, got, want)
		}
	}
	if e := NewError(CodeBusy, ""); e.Error() != "wire: busy: "+CodeBusy.Text() || !errors.Is(e, NewError(CodeBusy, "x")) {
		t.Fatalf("%v", e)
	}
}

// TestAppendErrorResponse answers failed requests: the code, the text, no body.
func TestAppendErrorResponse(t *testing.T) {
	hdr := RequestHeader{APIKey: 77, RequestID: 9}
	for err, wantText := range map[error]string{
		&ProtocolError{Code: CodeUnknownAPI}:   "",
		malformed("produce body ends early"):   "produce body ends early",
		errors.New("cannot open segment: EIO"): "cannot open segment: EIO",
	} {
		var r Response
		if _, derr := r.Decode(AppendErrorResponse(nil, hdr, err), DefaultMaxFrame); derr != nil {
			t.Fatal(derr)
		}
		if r.Header != (ResponseHeader{9, 77, CodeOf(err)}) || r.Text != wantText || r.Body != nil {
			t.Fatalf("%v: answered %+v", err, r)
		}
	}
}

// TestLongStrings cuts strings longer than MaxString when encoding, so the frame stays
// well formed.
func TestLongStrings(t *testing.T) {
	r := Response{Header: ResponseHeader{APIKey: APIFetch, Code: CodeInternal}, Text: strings.Repeat("x", MaxString+10)}
	var got Response
	if _, err := got.Decode(r.AppendTo(nil), DefaultMaxFrame); err != nil || len(got.Text) != MaxString {
		t.Fatalf("text of %d bytes, %v", len(got.Text), err)
	}
}
