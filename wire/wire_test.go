package wire

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestRequestRoundTrip encodes every sample request after some bytes already in the
// buffer, decodes it followed by more bytes, and checks the fields, the rest, and that
// encoding again gives the same bytes.
func TestRequestRoundTrip(t *testing.T) {
	for name, want := range sampleRequests() {
		t.Run(name, func(t *testing.T) {
			enc := want.AppendTo([]byte("prefix"))
			frame := enc[len("prefix"):]
			if int(le.Uint32(frame))+4 != len(frame) {
				t.Fatalf("length field %d, frame of %d bytes", le.Uint32(frame), len(frame))
			}
			var got Request
			rest, err := got.Decode(append(frame, "next"...), DefaultMaxFrame)
			if err != nil || string(rest) != "next" {
				t.Fatalf("Decode: rest %q, %v", rest, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded %+v\nwant %+v", got.Body, want.Body)
			}
			if again := got.AppendTo(nil); !bytes.Equal(again, frame) {
				t.Fatalf("re-encoded\n%x\nwant\n%x", again, frame)
			}
		})
	}
}

// TestResponseRoundTrip is TestRequestRoundTrip for responses.
func TestResponseRoundTrip(t *testing.T) {
	for name, want := range sampleResponses() {
		t.Run(name, func(t *testing.T) {
			frame := want.AppendTo(nil)
			var got Response
			rest, err := got.Decode(append(frame, 1, 2, 3), DefaultMaxFrame)
			if err != nil || !bytes.Equal(rest, []byte{1, 2, 3}) {
				t.Fatalf("Decode: rest %v, %v", rest, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded %+v %+v\nwant %+v %+v", got, got.Body, want, want.Body)
			}
			if again := got.AppendTo(nil); !bytes.Equal(again, frame) {
				t.Fatalf("re-encoded\n%x\nwant\n%x", again, frame)
			}
			if (got.Err() == nil) != (want.Header.Code == CodeNone) || CodeOf(got.Err()) != want.Header.Code {
				t.Fatalf("Err() = %v for code %v", got.Err(), want.Header.Code)
			}
		})
	}
}

// TestDecodeReusesBody decodes a second frame of the same API into a Request whose body
// already holds a message: every field must be overwritten.
func TestDecodeReusesBody(t *testing.T) {
	reqs := sampleRequests()
	var r Request
	for _, name := range []string{"produce", "produce-empty", "metadata-some", "metadata-all", "produce"} {
		body, want := r.Body, reqs[name]
		if _, err := r.Decode(want.AppendTo(nil), DefaultMaxFrame); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r, want) {
			t.Fatalf("%s: decoded %+v into a reused body", name, r.Body)
		}
		if body != nil && body.Key() == r.Header.APIKey && body != r.Body {
			t.Fatalf("%s: body of the same API not reused", name)
		}
	}
}

// TestProduceFrameHeader checks the zero-copy produce path against the whole-frame one:
// AppendFrameHeader plus the batches is the frame AppendTo makes, and DecodeFrameHeader
// asks for more bytes on every prefix too short for the header, then finds the batches.
func TestProduceFrameHeader(t *testing.T) {
	for _, name := range []string{"produce", "produce-empty", "produce-first"} {
		want := sampleRequests()[name]
		p := want.Body.(*ProduceRequest)
		frame := want.AppendTo(nil)
		head := p.AppendFrameHeader(nil, want.Header, len(p.Batches))
		if !bytes.Equal(append(head, p.Batches...), frame) {
			t.Fatalf("%s: frame header + batches differ from the frame", name)
		}
		size, _, err := PeekFrame(frame, DefaultMaxFrame)
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n <= len(frame); n++ {
			var got ProduceRequest
			off, err := got.DecodeFrameHeader(frame[:n], size)
			if n < len(head) {
				if err != ErrShort || off <= n || off > len(head) {
					t.Fatalf("%s: prefix of %d: need %d, %v", name, n, off, err)
				}
				continue
			}
			want := *p
			want.Batches = nil
			if err != nil || off != len(head) || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: prefix of %d: off %d (want %d), %+v, %v", name, n, off, len(head), got, err)
			}
		}
	}
}

// TestFetchFrameHeader checks that the zero-copy fetch header plus the records is the
// frame AppendTo makes.
func TestFetchFrameHeader(t *testing.T) {
	for _, name := range []string{"fetch", "fetch-empty", "fetch-out-of-range"} {
		want := sampleResponses()[name]
		f := want.Body.(*FetchResponse)
		head := f.AppendFrameHeader(nil, want.Header, len(f.Records))
		if len(head) != FetchFrameHeaderSize {
			t.Fatalf("%s: header of %d bytes, want %d", name, len(head), FetchFrameHeaderSize)
		}
		if !bytes.Equal(append(head, f.Records...), want.AppendTo(nil)) {
			t.Fatalf("%s: frame header + records differ from the frame", name)
		}
	}
}

// TestLogicalRanges checks that the ranges of p partitions tile [0, 65536) in order and
// that PartitionOf inverts them, for every p at the edges and some in between.
func TestLogicalRanges(t *testing.T) {
	for _, p := range []int{1, 2, 3, 7, 100, 1000, 65535, MaxPartitions} {
		next := 0
		for i := range p {
			lo, hi := LogicalRange(i, p)
			if lo != next || hi <= lo {
				t.Fatalf("p=%d: partition %d serves [%d, %d) after %d", p, i, lo, hi, next)
			}
			for _, l := range []int{lo, hi - 1, (lo + hi) / 2} {
				if got := PartitionOf(uint16(l), p); got != i {
					t.Fatalf("p=%d: PartitionOf(%d) = %d, want %d", p, l, got, i)
				}
			}
			next = hi
		}
		if next != LogicalPartitions {
			t.Fatalf("p=%d: ranges end at %d", p, next)
		}
	}
}

// TestTables checks the API and code tables: every entry named, names unique, fatal codes
// never retriable, and a constructor for both sides of every API.
func TestTables(t *testing.T) {
	names := map[string]bool{}
	for c := Code(0); c.Known(); c++ {
		if n := c.String(); n == "" || names[n] || c.Text() == "" || c.Fatal() && c.Retriable() {
			t.Fatalf("code %d: name %q, text %q, fatal %v, retriable %v", c, n, c.Text(), c.Fatal(), c.Retriable())
		}
		names[c.String()] = true
	}
	for k := APIKey(0); k.Known(); k++ {
		minV, maxV, ok := k.Versions()
		req, resp := NewRequest(k), NewResponse(k)
		if !ok || minV > maxV || k.String() == "" || req.Key() != k || resp.Key() != k {
			t.Fatalf("api %d: %q versions %d-%d, bodies %T %T", k, k, minV, maxV, req, resp)
		}
	}
	if Code(len(codes)).Known() || NewRequest(APIKey(len(apis))) != nil || Code(500).String() != "code(500)" {
		t.Fatal("unknown values are known")
	}
}

// TestProtocolDocTables checks that docs/protocol.md lists every API key and error code
// with the number, name and properties the tables give them, so that the document and
// the code cannot drift apart.
func TestProtocolDocTables(t *testing.T) {
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	yesNo := map[bool]string{true: "yes", false: "no"}
	var want []string
	for k := APIKey(0); k.Known(); k++ {
		minV, maxV, _ := k.Versions()
		want = append(want, "| "+itoa(int(k))+" | `"+k.String()+"` | "+itoa(int(minV))+" | "+itoa(int(maxV))+" |")
	}
	for c := Code(0); c.Known(); c++ {
		want = append(want, "| "+itoa(int(c))+" | `"+c.String()+"` | "+yesNo[c.Retriable()]+" | "+
			yesNo[c.Fatal()]+" | "+c.Text()+" |")
	}
	for _, row := range want {
		if !strings.Contains(string(doc), "\n"+row) {
			t.Errorf("docs/protocol.md lacks the row %s", row)
		}
	}
}

// TestHotPathAllocs checks that the broker's hot paths allocate nothing: peeking a frame,
// decoding a produce header from a prefix, decoding a fetch request into a reused body,
// and encoding a produce answer or a fetch response header into a buffer with room.
func TestHotPathAllocs(t *testing.T) {
	produce := sampleRequests()["produce"]
	pframe := produce.AppendTo(nil)
	fetch := sampleRequests()["fetch"]
	fframe := fetch.AppendTo(nil)
	var (
		p   ProduceRequest
		r   Request
		buf = make([]byte, 0, 128)
		f   = FetchResponse{HighWatermark: 10, LogStartOffset: 1, Checkpoint: 9}
	)
	steps := map[string]func(){
		"produce header": func() {
			size, _, err := PeekFrame(pframe[:60], DefaultMaxFrame)
			if _, err2 := p.DecodeFrameHeader(pframe[:60], size); err != nil || err2 != nil {
				t.Fatal(err, err2)
			}
		},
		"produce header, short": func() {
			if _, err := p.DecodeFrameHeader(pframe[:20], len(pframe)); err != ErrShort {
				t.Fatal(err)
			}
		},
		"fetch request": func() {
			if _, err := r.Decode(fframe, DefaultMaxFrame); err != nil {
				t.Fatal(err)
			}
		},
		"produce response": func() {
			buf = AppendProduceResponse(buf[:0], ResponseHeader{RequestID: 1, APIKey: APIProduce}, "", &ProduceResponse{Checkpoint: 3})
		},
		"fetch response header": func() {
			buf = f.AppendFrameHeader(buf[:0], ResponseHeader{RequestID: 1, APIKey: APIFetch}, 1<<20)
		},
	}
	for name, step := range steps {
		step() // the first run may set up a reused body
		if n := testing.AllocsPerRun(100, step); n != 0 {
			t.Errorf("%s: %v allocations", name, n)
		}
	}
}

// TestAppendProduceResponse: the produce answer the broker builds on its stack is the
// frame Response.AppendTo makes of the same answer, and the same bad answers panic.
func TestAppendProduceResponse(t *testing.T) {
	body := &ProduceResponse{Version: 2, Session: 7, Checkpoint: 40, BaseOffset: 41, LastOffset: 44, RetryAfterMs: 5}
	hdr := func(code Code) ResponseHeader { return ResponseHeader{RequestID: 9, APIKey: APIProduce, Code: code} }
	for _, c := range []struct {
		hdr  ResponseHeader
		text string
		body *ProduceResponse
	}{
		{hdr(CodeNone), "", body},
		{hdr(CodeBusy), "slow down", body},
		{hdr(CodeUnknownTopic), "no such topic", nil},
	} {
		want := (&Response{Header: c.hdr, Text: c.text, Body: bodyOrNil(c.body)}).AppendTo([]byte("x"))
		if got := AppendProduceResponse([]byte("x"), c.hdr, c.text, c.body); !bytes.Equal(got, want) {
			t.Errorf("%v: % x, want % x", c.hdr.Code, got, want)
		}
	}
	for name, bad := range map[string]func(){
		"success without a body": func() { AppendProduceResponse(nil, hdr(CodeNone), "", nil) },
		"fatal with a body":      func() { AppendProduceResponse(nil, hdr(CodeMalformed), "", body) },
		"another API":            func() { AppendProduceResponse(nil, ResponseHeader{APIKey: APIFetch}, "", body) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			bad()
		}()
	}
}

// bodyOrNil is b as a Body, nil for none (a nil *ProduceResponse in an interface is no
// nil Body).
func bodyOrNil(b *ProduceResponse) Body {
	if b == nil {
		return nil
	}
	return b
}
