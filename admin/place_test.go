package admin

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestPlaceModel drives Place through random joins, deaths, new topics and load changes
// and checks its invariants after every pass: every partition placed once on a live
// broker; no broker holds more of a topic than its share; a partition whose broker lives
// moves only for the topic limit or within the rebalance's MaxMoves; and with nothing
// changing, passes reach a fixed point.
func TestPlaceModel(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 42))
		lim := Limits{MaxMoves: 3, Slack: 0.2}
		brokers := []Broker{{ID: "b0", Capacity: 1}}
		nextBroker := 1
		var parts []Partition
		addTopic := func() {
			name := fmt.Sprintf("t%d", rng.IntN(1000))
			for _, p := range parts {
				if p.Topic == name {
					return
				}
			}
			for i := range 1 + rng.IntN(12) {
				parts = append(parts, Partition{PartitionID{name, i}, 0.1 + rng.Float64()*10})
			}
		}
		addTopic()
		prev := Assignment{}
		for step := range 150 {
			switch k := rng.IntN(10); {
			case k < 2:
				brokers = append(brokers, Broker{ID: fmt.Sprintf("b%d", nextBroker), Capacity: float64(1 + rng.IntN(2))})
				nextBroker++
			case k < 3 && len(brokers) > 1:
				i := rng.IntN(len(brokers))
				brokers = append(brokers[:i:i], brokers[i+1:]...)
			case k < 4:
				addTopic()
			case k < 6:
				i := rng.IntN(len(parts))
				parts[i].Load = 0.1 + rng.Float64()*10
			}
			next := Place(brokers, parts, prev, lim)
			checkPlacement(t, fmt.Sprintf("seed %d step %d", seed, step), brokers, parts, prev, next, lim)
			prev = next
		}
		// Nothing changes any more: a fixed point within a bounded number of passes.
		for pass := 0; ; pass++ {
			next := Place(brokers, parts, prev, lim)
			checkPlacement(t, fmt.Sprintf("seed %d settling pass %d", seed, pass), brokers, parts, prev, next, lim)
			if same(prev, next) {
				break
			}
			if pass > len(parts) {
				t.Fatalf("seed %d: no fixed point after %d passes", seed, pass)
			}
			prev = next
		}
	}
}

func same(a, b Assignment) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func checkPlacement(t *testing.T, at string, brokers []Broker, parts []Partition, prev, next Assignment, lim Limits) {
	t.Helper()
	live := map[string]bool{}
	for _, b := range brokers {
		live[b.ID] = true
	}
	if len(next) != len(parts) {
		t.Fatalf("%s: %d placed of %d partitions", at, len(next), len(parts))
	}
	topicParts := map[string]int{}
	for _, p := range parts {
		topicParts[p.Topic]++
		if !live[next[p.PartitionID]] {
			t.Fatalf("%s: %v on %q, not a live broker", at, p.PartitionID, next[p.PartitionID])
		}
	}
	held := map[[2]string]int{}
	prevHeld := map[[2]string]int{}
	for pid, b := range next {
		held[[2]string{b, pid.Topic}]++
	}
	for pid, b := range prev {
		if live[b] {
			prevHeld[[2]string{b, pid.Topic}]++
		}
	}
	evictions := 0
	for k, n := range held {
		limit := (topicParts[k[1]] + len(brokers) - 1) / len(brokers)
		if n > limit {
			t.Fatalf("%s: broker %s holds %d of topic %s, limit %d", at, k[0], n, k[1], limit)
		}
	}
	for k, n := range prevHeld {
		limit := (topicParts[k[1]] + len(brokers) - 1) / len(brokers)
		evictions += max(n-limit, 0)
	}
	moved := 0
	for _, p := range parts {
		if b, ok := prev[p.PartitionID]; ok && live[b] && next[p.PartitionID] != b {
			moved++
		}
	}
	if moved > lim.MaxMoves+evictions {
		t.Fatalf("%s: %d partitions moved off live brokers (max moves %d, topic-limit evictions %d)", at, moved, lim.MaxMoves, evictions)
	}
}

// TestPlaceJoinSpreads: a broker that joins takes its share of the load over a few
// passes, MaxMoves at a time; placements are stable otherwise.
func TestPlaceJoinSpreads(t *testing.T) {
	var parts []Partition
	for i := range 12 {
		parts = append(parts, Partition{PartitionID{"t", i}, 1})
	}
	lim := Limits{MaxMoves: 2, Slack: 0.1}
	a := Place([]Broker{{ID: "a"}, {ID: "b"}}, parts, nil, lim)
	if same(a, Place([]Broker{{ID: "a"}, {ID: "b"}}, parts, a, lim)) == false {
		t.Fatal("placement moved with nothing changed")
	}
	three := []Broker{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	for pass := 1; ; pass++ {
		next := Place(three, parts, a, lim)
		if same(a, next) {
			break
		}
		a = next
		if pass > 10 {
			t.Fatal("no fixed point")
		}
	}
	count := map[string]int{}
	for _, b := range a {
		count[b]++
	}
	if count["a"] != 4 || count["b"] != 4 || count["c"] != 4 {
		t.Fatalf("after c joined: %v, want 4 each", count)
	}
}
