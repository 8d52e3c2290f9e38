package client

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"sluice/wire"
)

// TestLogicalOf pins the key hash: it is part of the protocol between clients
// (docs/protocol.md §8 lists the same values).
func TestLogicalOf(t *testing.T) {
	f := func(key string, fnv, mixed uint64, want uint16) {
		t.Helper()
		if got := fmix64(fnv); got != mixed {
			t.Fatalf("fmix64(%#x) = %#x, want %#x", fnv, got, mixed)
		}
		if got := LogicalOf([]byte(key)); got != want || uint64(want) != mixed>>48 {
			t.Fatalf("LogicalOf(%q) = %#x, want %#x", key, got, want)
		}
	}
	// FNV-1a 64 of "" is its offset basis; of "a", the published test vector.
	f("", 0xcbf29ce484222325, 0xefd01f60ba992926, 0xefd0)
	f("a", 0xaf63dc4c8601ec8c, 0x82a2a958a9bece5b, 0x82a2)
	f("user-42", 0x32c6d7a54d35dacb, 0xa39532c7ab051e8d, 0xa395)
	f("k0", 0x08be0e07b562230e, 0x0549eda7a9a2b5c9, 0x0549)
}

// TestLogicalOfSpread: keys spread evenly over physical partitions, which take the high
// bits of the logical id. Short keys that differ in one byte (k0..k99, which the folded
// 32-bit FNV-1a of old sent 7/8/5/18/6/15/9/32 over 8 partitions), sequential names and
// random keys must pass a chi-square test at the 0.1% level over 8 and 3 partitions, and
// no partition may get less than half or more than twice its share.
func TestLogicalOfSpread(t *testing.T) {
	// The chi-square values exceeded with probability 0.001, for P-1 degrees of freedom.
	critical := map[int]float64{8: 24.32, 3: 13.82}
	check := func(name string, keys [][]byte) {
		t.Helper()
		for p, crit := range critical {
			counts := make([]int, p)
			for _, k := range keys {
				counts[wire.PartitionOf(LogicalOf(k), p)]++
			}
			expect := float64(len(keys)) / float64(p)
			chi2 := 0.0
			for _, n := range counts {
				chi2 += (float64(n) - expect) * (float64(n) - expect) / expect
			}
			if chi2 > crit || slices.Min(counts) < int(expect/2) || slices.Max(counts) > int(2*expect) {
				t.Errorf("%s over %d partitions: %v, chi-square %.1f (limit %.2f)", name, p, counts, chi2, crit)
			}
		}
	}
	var short, names, random [][]byte
	for i := range 100 {
		short = append(short, []byte(fmt.Sprintf("k%d", i)))
	}
	rng := rand.New(rand.NewPCG(1, 2)) // fixed: the test is deterministic
	for i := range 10000 {
		names = append(names, []byte(fmt.Sprintf("user-%d", i)))
		key := make([]byte, 1+rng.IntN(16))
		for j := range key {
			key[j] = byte(rng.Uint32())
		}
		random = append(random, key)
	}
	check("k0..k99", short)
	check("user-0..user-9999", names)
	check("10000 random keys", random)
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

// TestRouteKeylessSticks: keyless records stay on one partition until its batch closes
// (the window's next ord moves), then go to the next partition, round robin; a batch
// closing in another partition does not move them.
func TestRouteKeylessSticks(t *testing.T) {
	rt := router{p: 3}
	ords := []uint64{1, 1, 1} // each partition's next ord
	nextOrd := func(part int) uint64 { return ords[part] }
	route := func() int {
		rt.follow(nextOrd)
		_, part := rt.route(&Record{})
		return part
	}
	var parts []int
	for range 3 {
		a, b := route(), route()
		ords[a]++ // the batch closed (full, lingered or flushed)
		parts = append(parts, a, b)
	}
	ords[1]++ // a batch closing in another partition does not move keyless records
	last := route()
	ords[0]++
	if fmt.Sprint(parts) != "[0 0 1 1 2 2]" || last != 0 || route() != 1 {
		t.Fatalf("keyless records went to %v then %d", parts, last)
	}
}
