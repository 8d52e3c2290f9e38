package check

import (
	"errors"
	"testing"
)

func TestValueRoundTrip(t *testing.T) {
	for _, size := range []int{0, headerLen, 25, 200} {
		id := ID{Producer: 7<<40 | 3, Seq: 1<<33 + 5}
		v := AppendValue([]byte("prefix"), id, size)[len("prefix"):]
		if len(v) != max(size, headerLen) {
			t.Fatalf("size %d: value of %d bytes", size, len(v))
		}
		got, err := DecodeValue(v)
		if err != nil || got != id {
			t.Fatalf("size %d: %v, %v", size, got, err)
		}
		for i := range v { // every single-bit flip is caught
			v[i] ^= 1
			if _, err := DecodeValue(v); !errors.Is(err, ErrBadValue) {
				t.Fatalf("size %d: flip at byte %d not caught: %v", size, i, err)
			}
			v[i] ^= 1
		}
	}
	if _, err := DecodeValue([]byte("short")); !errors.Is(err, ErrBadValue) {
		t.Fatal(err)
	}
}

// FuzzDecodeValue: any input decodes without panicking, and what decodes re-encodes to
// its own header.
func FuzzDecodeValue(f *testing.F) {
	f.Add(AppendValue(nil, ID{1, 2}, 64))
	f.Add([]byte("sck1"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, v []byte) {
		id, err := DecodeValue(v)
		if err != nil {
			return
		}
		if again := AppendValue(nil, id, headerLen); string(again[:20]) != string(v[:20]) {
			t.Fatalf("decoded %v from a header %x that re-encodes as %x", id, v[:20], again[:20])
		}
	})
}
