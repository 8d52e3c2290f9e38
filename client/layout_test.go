package client

import (
	"math"
	"math/rand/v2"
	"testing"

	"sluice/batch"
	"sluice/wire"
)

// TestLayoutSegments: where each partition's segments start and end, and which gates
// hold them.
func TestLayoutSegments(t *testing.T) {
	v := layoutView{lo: 0, hi: 65535, ls: []wire.Layout{
		{Version: 1, Partitions: 2},
		{Version: 2, Partitions: 4, Switches: []int64{10, -1}},
	}}
	f := func(j int, x int64, wantK int, wantEnd int64) {
		t.Helper()
		if k, end := v.segment(j, x); k != wantK || end != wantEnd {
			t.Errorf("segment(%d, %d) = %d, %d; want %d, %d", j, x, k, end, wantK, wantEnd)
		}
	}
	f(0, 0, 0, 10)
	f(0, 10, 1, math.MaxInt64)
	f(1, 5, 0, math.MaxInt64) // not switched yet: its end is unknown
	f(3, 0, 1, math.MaxInt64) // new partition: its first layout
	pos := map[int]int64{0: 10, 1: 0}
	at := func(i int) int64 { return pos[i] }
	// Layout 2's partitions 0 and 1 take old partition 0's range; 2 and 3 old 1's.
	for j, want := range []bool{true, true, false, false} {
		if got := v.gateOpen(j, 1, at); got != want {
			t.Errorf("gate of %d: %v", j, got)
		}
	}
	if lim, stamp := v.bound(3, 0, at); lim != 0 || stamp != 2 {
		t.Errorf("bound of a closed gate: %d %d", lim, stamp)
	}
	v.ls[1].Switches[1] = 7
	pos[1] = 7
	if lim, _ := v.bound(3, 0, at); lim != math.MaxInt64 {
		t.Errorf("bound of an open gate: %d", lim)
	}
	// A consumer of [0, 100] reads old partition 0 and new partition 0 only.
	v.lo, v.hi = 0, 100
	for j, want := range []bool{true, false, false, false} {
		if got := v.reads(j); got != want {
			t.Errorf("reads(%d) = %v", j, got)
		}
	}
	if !batch.NewerLayout(3, 2) || batch.NewerLayout(2, 2) || batch.NewerLayout(0, 2) || !batch.NewerLayout(1, 65535) {
		t.Error("NewerLayout")
	}
}

// TestLayoutOrderModel runs random histories: records of random logical ids appended to
// the partition their layout routes them to, expansions (each old partition switching at
// a random later time, its switch recorded then), and a consumer of a random logical
// range reading the partitions in random order and amounts, as far as bound allows,
// with a view of the layouts refreshed at random. Per logical id, it must deliver every
// record of its range exactly once, in the order produced.
func TestLayoutOrderModel(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		runLayoutModel(t, seed)
	}
}

type modelRec struct {
	id     uint16
	seq    int
	layout uint16 // the version it was routed by (a batch's stamp)
}

func runLayoutModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	ids := make([]uint16, 1+rng.IntN(30))
	for i := range ids {
		ids[i] = uint16(rng.IntN(65536))
	}
	truth := []wire.Layout{{Version: 1, Partitions: uint32(1 + rng.IntN(3))}}
	logs := make([][]modelRec, 64)
	pending := map[int]bool{} // old partitions of the last layout not switched yet
	seqs := map[uint16]int{}
	snapshot := func() []wire.Layout {
		out := make([]wire.Layout, len(truth))
		for k, l := range truth {
			out[k] = wire.Layout{Version: l.Version, Partitions: l.Partitions, Switches: append([]int64(nil), l.Switches...)}
		}
		return out
	}
	lo := rng.IntN(65536)
	hi := lo + rng.IntN(65536-lo)
	v := layoutView{lo: lo, hi: hi, ls: snapshot()}
	pos := make([]int64, 64)
	got := map[uint16][]int{}
	consume := func() {
		j := rng.IntN(int(v.last().Partitions))
		if !v.reads(j) {
			return
		}
		limit, stamp := v.bound(j, pos[j], func(i int) int64 { return pos[i] })
		for n := rng.IntN(5); n > 0 && pos[j] < min(limit, int64(len(logs[j]))); n-- {
			r := logs[j][pos[j]]
			if batch.NewerLayout(r.layout, stamp) {
				break // the consumer's view is behind: it learns the layouts first
			}
			pos[j]++
			if int(r.id) >= lo && int(r.id) <= hi {
				got[r.id] = append(got[r.id], r.seq)
			}
		}
	}
	for step := 0; step < 400; step++ {
		switch op := rng.IntN(20); {
		case op < 10: // produce; a partition that has not switched takes only the old layout's records
			id := ids[rng.IntN(len(ids))]
			k := len(truth) - 1
			p := wire.PartitionOf(id, int(truth[k].Partitions))
			if k > 0 && pending[p] {
				k--
				p = wire.PartitionOf(id, int(truth[k].Partitions))
				if !pending[p] {
					continue // its old partition switched: the record waits (the producer's drain)
				}
			}
			seqs[id]++
			logs[p] = append(logs[p], modelRec{id, seqs[id], uint16(truth[k].Version)})
		case op < 12 && len(pending) == 0 && truth[len(truth)-1].Partitions < 40: // expand
			last := truth[len(truth)-1]
			n := last.Partitions + uint32(1+rng.IntN(8))
			sw := make([]int64, last.Partitions)
			for i := range sw {
				sw[i] = -1
				pending[i] = true
			}
			truth = append(truth, wire.Layout{Version: last.Version + 1, Partitions: n, Switches: sw})
		case op < 15 && len(pending) > 0: // an old partition switches
			for p := range pending {
				truth[len(truth)-1].Switches[p] = int64(len(logs[p]))
				delete(pending, p)
				break
			}
		case op < 16:
			v.ls = snapshot()
		default:
			consume()
		}
	}
	for p := range pending {
		truth[len(truth)-1].Switches[p] = int64(len(logs[p]))
	}
	v.ls = snapshot()
	for range 20000 {
		consume()
	}
	want := map[uint16]int{}
	for p := range logs {
		for _, r := range logs[p] {
			if int(r.id) >= lo && int(r.id) <= hi {
				want[r.id]++
			}
		}
	}
	for id, n := range want {
		s := got[id]
		if len(s) != n {
			t.Fatalf("seed %d: id %d: %d of %d records delivered", seed, id, len(s), n)
		}
		for i := range s {
			if s[i] != i+1 {
				t.Fatalf("seed %d: id %d delivered out of order: %v", seed, id, s)
			}
		}
	}
}
