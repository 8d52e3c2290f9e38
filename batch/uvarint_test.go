package batch

import (
	"encoding/binary"
	"testing"
)

// TestUvarintAgainstBinary holds uvarint, with its one- and two-byte fast paths, to
// encoding/binary on every value of up to two bytes and a little past, values at every
// width, and every truncation: the value and next position agree, and a truncated or overlong varint is
// -1 wherever binary.Uvarint fails.
func TestUvarintAgainstBinary(t *testing.T) {
	check := func(b []byte, p int) {
		t.Helper()
		v, next := uvarint(b, p)
		wv, n := uint64(0), 0
		if p < len(b) {
			wv, n = binary.Uvarint(b[p:])
		}
		switch {
		case n <= 0 && next != -1:
			t.Fatalf("% x at %d: got %d, %d; binary.Uvarint fails (%d)", b, p, v, next, n)
		case n > 0 && (next != p+n || v != wv):
			t.Fatalf("% x at %d: got %d, %d; want %d, %d", b, p, v, next, wv, p+n)
		}
	}
	vals := []uint64{1<<21 - 1, 1 << 21, 1<<21 + 1, 1<<28 - 1, 1 << 35, 1<<63 + 5, ^uint64(0)}
	for v := range uint64(1 << 15) {
		vals = append(vals, v)
	}
	for _, v := range vals {
		b := binary.AppendUvarint([]byte{0xff}, v) // at p=1, after a byte that is not its own
		for end := 1; end <= len(b); end++ {
			check(b[:end], 1)
		}
	}
	// Overlong: eleven continuation bytes.
	check([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 0)
}
