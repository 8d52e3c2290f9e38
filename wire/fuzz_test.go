package wire

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzDecodeRequest feeds arbitrary bytes to Request.Decode, as they are and with the
// length field patched to the input's size so that mutations reach the body decoders.
// Nothing may panic, every error must be typed, a request that decodes must encode to the
// same bytes (the format has one encoding per message), and the zero-copy produce header
// decoder must agree with the whole-frame one.
func FuzzDecodeRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRequest(t, data)
		if len(data) >= 4 {
			checkRequest(t, patch32(data, 0, uint32(len(data)-4)))
		}
	})
}

func checkRequest(t *testing.T, data []byte) {
	var r Request
	rest, err := r.Decode(data, DefaultMaxFrame)
	checkProduceHeader(t, data, err)
	if err != nil {
		requireTyped(t, err)
		if size, _, perr := PeekFrame(data, DefaultMaxFrame); errors.Is(err, ErrShort) && perr == nil && size <= len(data) {
			t.Fatalf("ErrShort for a whole frame of %d bytes", size)
		}
		return
	}
	frame := data[:len(data)-len(rest)]
	if again := r.AppendTo(nil); !bytes.Equal(again, frame) {
		t.Fatalf("re-encoded %s request differs:\n got %x\nwant %x", r.Header.APIKey, again, frame)
	}
}

// checkProduceHeader runs DecodeFrameHeader on a whole produce frame: it must succeed
// exactly when the whole-frame decoder does (wholeErr), with the same fields.
func checkProduceHeader(t *testing.T, data []byte, wholeErr error) {
	size, hdr, err := PeekFrame(data, DefaultMaxFrame)
	if err != nil || hdr.APIKey != APIProduce || size > len(data) {
		return
	}
	var p ProduceRequest
	off, err := p.DecodeFrameHeader(data, size)
	if (err == nil) != (wholeErr == nil) {
		t.Fatalf("DecodeFrameHeader: %v, Decode: %v", err, wholeErr)
	}
	if err != nil {
		requireTyped(t, err)
		return
	}
	var whole ProduceRequest
	if _, err := whole.Decode(data[RequestHeaderSize:size]); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(whole.Batches, data[off:size]) {
		t.Fatalf("batches at %d, whole decode found %d bytes", off, len(whole.Batches))
	}
	whole.Batches = nil
	if !reflect.DeepEqual(p, whole) {
		t.Fatalf("header %+v, whole decode %+v", p, whole)
	}
}

// FuzzPeekFrame checks PeekFrame and PeekResponse against the bytes and the limits, with
// the default limit and a small one.
func FuzzPeekFrame(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, maxFrame := range []int{DefaultMaxFrame, 64} {
			size, hdr, err := PeekFrame(data, maxFrame)
			checkPeek(t, data, maxFrame, size, err)
			if len(data) >= RequestHeaderSize {
				if hdr != (RequestHeader{APIKey(le.Uint16(data[4:])), le.Uint16(data[6:]), le.Uint32(data[8:])}) {
					t.Fatalf("header %+v from %x", hdr, data[:RequestHeaderSize])
				}
			}
			if err == nil {
				if minV, maxV, ok := hdr.APIKey.Versions(); !ok || hdr.APIVersion < minV || hdr.APIVersion > maxV {
					t.Fatalf("accepted %+v", hdr)
				}
			}
			size, _, err = PeekResponse(data, maxFrame)
			checkPeek(t, data, maxFrame, size, err)
		}
	})
}

func checkPeek(t *testing.T, data []byte, maxFrame, size int, err error) {
	if len(data) < 4 {
		if err != ErrShort || size != RequestHeaderSize {
			t.Fatalf("%d bytes: size %d, %v", len(data), size, err)
		}
		return
	}
	want := int(le.Uint32(data)) + 4
	switch {
	case err == ErrShort:
		if len(data) >= RequestHeaderSize || size != RequestHeaderSize || want > maxFrame || want < RequestHeaderSize {
			t.Fatalf("%d bytes, frame of %d: ErrShort, size %d", len(data), want, size)
		}
	case err == nil, CodeOf(err) == CodeUnknownAPI, CodeOf(err) == CodeUnsupportedVersion:
		if size != want || size > maxFrame || size < RequestHeaderSize {
			t.Fatalf("size %d for length field %d, limit %d: %v", size, want-4, maxFrame, err)
		}
	case errors.Is(err, ErrFrameTooLarge):
		if want <= maxFrame {
			t.Fatalf("frame of %d refused under the limit %d", want, maxFrame)
		}
	case errors.Is(err, ErrMalformed):
		if want >= RequestHeaderSize {
			t.Fatalf("frame of %d refused as malformed", want)
		}
	default:
		t.Fatalf("unexpected error %v", err)
	}
}

// FuzzDecodeResponse feeds arbitrary bytes to Response.Decode, like FuzzDecodeRequest.
// A response whose code this package does not know has its body skipped, so it is the
// one case that need not encode back to the same bytes.
func FuzzDecodeResponse(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		inputs := [][]byte{data}
		if len(data) >= 4 {
			inputs = append(inputs, patch32(data, 0, uint32(len(data)-4)))
		}
		for _, b := range inputs {
			var r Response
			rest, err := r.Decode(b, DefaultMaxFrame)
			if err != nil {
				requireTyped(t, err)
				continue
			}
			if !r.Header.Code.Known() {
				continue
			}
			if again, frame := r.AppendTo(nil), b[:len(b)-len(rest)]; !bytes.Equal(again, frame) {
				t.Fatalf("re-encoded %s response differs:\n got %x\nwant %x", r.Header.APIKey, again, frame)
			}
		}
	})
}

var writeSeeds = flag.Bool("write-seeds", false, "rewrite the fuzz seed corpus in testdata/fuzz")

// TestWriteSeeds rewrites the checked-in seed corpus when run with -write-seeds: every
// sample message, and frames that fail each check.
func TestWriteSeeds(t *testing.T) {
	if !*writeSeeds {
		t.Skip("run with -write-seeds to rewrite testdata/fuzz")
	}
	for _, target := range []string{"FuzzDecodeRequest", "FuzzPeekFrame", "FuzzDecodeResponse"} {
		if err := os.RemoveAll(filepath.Join("testdata", "fuzz", target)); err != nil {
			t.Fatal(err)
		}
	}
	for name, r := range sampleRequests() {
		b := r.AppendTo(nil)
		writeSeed(t, "FuzzDecodeRequest", name, b)
		writeSeed(t, "FuzzPeekFrame", name, b[:RequestHeaderSize])
	}
	fetch := sampleRequests()["fetch"]
	bad := fetch.AppendTo(nil)
	for name, b := range map[string][]byte{
		"short":           bad[:7],
		"too-large":       patch32(bad, 0, 1<<30),
		"tiny-length":     patch32(bad, 0, 3),
		"unknown-api":     append(bad[:4:4], append([]byte{99, 0}, bad[6:]...)...),
		"bad-version":     append(bad[:4:4], append([]byte{1, 0, 1, 0}, bad[8:]...)...),
		"bad-topic":       (&Request{Header: fetch.Header, Body: &FetchRequest{Topic: []byte("a b")}}).AppendTo(nil),
		"trailing":        append(patch32(bad, 0, uint32(len(bad)-3)), 0),
		"metadata-counts": patch32((&Request{Header: RequestHeader{APIKey: APIMetadata}, Body: &MetadataRequest{}}).AppendTo(nil), RequestHeaderSize, 1<<31),
	} {
		writeSeed(t, "FuzzDecodeRequest", name, b)
		writeSeed(t, "FuzzPeekFrame", name, b[:min(len(b), RequestHeaderSize)])
	}
	for name, r := range sampleResponses() {
		writeSeed(t, "FuzzDecodeResponse", name, r.AppendTo(nil))
	}
}

// writeSeed writes b in the corpus file format of `go test -fuzz`.
func writeSeed(t *testing.T, target, name string, b []byte) {
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
