package client

import (
	"fmt"
	"testing"

	"sluice/wire"
)

// TestLogicalOf pins the key hash: it is part of the protocol between clients.
func TestLogicalOf(t *testing.T) {
	f := func(key string, want uint16) {
		t.Helper()
		if got := LogicalOf([]byte(key)); got != want {
			t.Fatalf("LogicalOf(%q) = %d, want %d", key, got, want)
		}
	}
	// FNV-1a 32 of "" is 0x811c9dc5, of "a" 0xe40c292c: folded, 0x811c^0x9dc5 and 0xe40c^0x292c.
	f("", 0x811c^0x9dc5)
	f("a", 0xe40c^0x292c)
	f("user-42", LogicalOf([]byte("user-42")))
	seen := map[uint16]bool{}
	for i := range 1000 {
		seen[LogicalOf([]byte(fmt.Sprintf("key-%d", i)))] = true
	}
	if len(seen) < 980 {
		t.Fatalf("1000 keys hash to only %d logical partitions", len(seen))
	}
}

func TestRoute(t *testing.T) {
	f := func(p int, r Record, wantLogical uint16, wantPart int) {
		t.Helper()
		rt := router{p: p}
		l, part := rt.route(&r)
		if l != wantLogical || part != wantPart {
			t.Fatalf("route %+v over %d: logical %d partition %d, want %d %d", r, p, l, part, wantLogical, wantPart)
		}
		if lo, hi := wire.LogicalRange(part, p); int(l) < lo || int(l) >= hi {
			t.Fatalf("logical %d outside partition %d [%d, %d)", l, part, lo, hi)
		}
	}
	f(1, Record{Key: []byte("a")}, LogicalOf([]byte("a")), 0)
	f(4, Record{Logical: 0, UseLogical: true}, 0, 0)
	f(4, Record{Logical: 16383, UseLogical: true}, 16383, 0)
	f(4, Record{Logical: 16384, UseLogical: true}, 16384, 1)
	f(4, Record{Logical: 65535, UseLogical: true}, 65535, 3)
	f(3, Record{Logical: 21844, UseLogical: true}, 21844, 0)
	f(3, Record{Logical: 21845, UseLogical: true}, 21845, 1)
	f(3, Record{Key: []byte("a"), Logical: 9, UseLogical: true}, 9, 0) // the logical id wins
	k := []byte("user-42")
	f(7, Record{Key: k}, LogicalOf(k), wire.PartitionOf(LogicalOf(k), 7))
	f(65536, Record{Logical: 1234, UseLogical: true}, 1234, 1234)
}

func TestRouteKeylessSticks(t *testing.T) {
	rt := router{p: 3}
	var parts []int
	for range 3 {
		_, a := rt.route(&Record{})
		_, b := rt.route(&Record{})
		rt.sealed(a)
		parts = append(parts, a, b)
	}
	rt.sealed(2 - 1) // a seal in another partition does not move keyless records
	_, last := rt.route(&Record{})
	if fmt.Sprint(parts) != "[0 0 1 1 2 2]" || last != 0 {
		t.Fatalf("keyless records went to %v then %d", parts, last)
	}
}
