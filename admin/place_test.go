package admin

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestPlaceModel drives Place through random joins, deaths, new topics, load changes and
// brokers turning HoldOnly (their registration unreadable) and back, and checks after
// every pass what checkPlacement lists; then, with nothing changing
// any more, that passes reach a fixed point in which every topic is within its spread
// limits and the load is balanced within the slack (or no single move would narrow the
// gap: partitions are not divisible).
func TestPlaceModel(t *testing.T) {
	for seed := range uint64(24) {
		rng := rand.New(rand.NewPCG(seed, 42))
		lim := Limits{MaxMoves: 1 + rng.IntN(4), Slack: 0.2}
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
			for i := range 1 + rng.IntN(24) {
				parts = append(parts, Partition{PartitionID{name, i}, 0.1 + rng.Float64()*10})
			}
		}
		addTopic()
		prev := Assignment{}
		for step := range 100 {
			switch k := rng.IntN(10); {
			case k < 2:
				brokers = append(brokers, Broker{ID: fmt.Sprintf("b%d", nextBroker), Capacity: float64(1 + rng.IntN(2))})
				nextBroker++
			case k < 4 && len(brokers) > 1:
				i := rng.IntN(len(brokers))
				if left := append(brokers[:i:i], brokers[i+1:]...); placeable(left) > 0 {
					brokers = left // some broker can take the dead one's partitions
				}
			case k < 5:
				addTopic()
			case k < 7:
				i := rng.IntN(len(parts))
				parts[i].Load = 0.1 + rng.Float64()*10
			case k < 8:
				i := rng.IntN(len(brokers))
				brokers[i].HoldOnly = !brokers[i].HoldOnly
				if placeable(brokers) == 0 {
					brokers[i].HoldOnly = false
				}
			}
			next := Place(brokers, parts, prev, lim)
			checkPlacement(t, fmt.Sprintf("seed %d step %d", seed, step), brokers, parts, prev, next, lim)
			prev = next
		}
		settle(t, fmt.Sprintf("seed %d", seed), brokers, parts, prev, lim)
	}
}

// settle runs passes with nothing changing until a fixed point, and checks it.
func settle(t *testing.T, at string, brokers []Broker, parts []Partition, prev Assignment, lim Limits) Assignment {
	t.Helper()
	for pass := 0; ; pass++ {
		next := Place(brokers, parts, prev, lim)
		checkPlacement(t, fmt.Sprintf("%s settling pass %d", at, pass), brokers, parts, prev, next, lim)
		if same(prev, next) {
			break
		}
		if pass > 4*len(parts) {
			t.Fatalf("%s: no fixed point after %d passes", at, pass)
		}
		prev = next
	}
	v := view(brokers, parts, prev)
	if k, n, limit := v.overLimit(); n > limit {
		t.Fatalf("%s: settled with broker %s holding %d of topic %s, limit %d", at, k[0], n, k[1], limit)
	}
	if h, p, j, ok := v.helpfulMove(lim.Slack); ok {
		t.Fatalf("%s: settled unbalanced: moving %v (load %.2f) from %s (share %.2f, fair %.2f) to %s would narrow the gap",
			at, p.PartitionID, p.Load, h, v.share(h), v.fair, j)
	}
	return prev
}

func placeable(brokers []Broker) int {
	n := 0
	for _, b := range brokers {
		if !b.HoldOnly {
			n++
		}
	}
	return n
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

// checkPlacement checks one pass from prev to next: every partition placed exactly once,
// never on a dead broker; at most MaxMoves partitions moved off live brokers (placing a
// new or a dead broker's partition is not a move), none off a HoldOnly one; a broker
// given a partition it did not hold is not HoldOnly and within that topic's spread
// limit; and a placement already stable (complete, within the limits, within the slack)
// is kept as it is.
func checkPlacement(t *testing.T, at string, brokers []Broker, parts []Partition, prev, next Assignment, lim Limits) {
	t.Helper()
	live, hold := map[string]bool{}, map[string]bool{}
	for _, b := range brokers {
		live[b.ID], hold[b.ID] = true, b.HoldOnly
	}
	if len(next) != len(parts) {
		t.Fatalf("%s: %d placed of %d partitions", at, len(next), len(parts))
	}
	for _, p := range parts {
		if b, ok := next[p.PartitionID]; !ok || !live[b] {
			t.Fatalf("%s: %v on %q, not a live broker", at, p.PartitionID, b)
		}
	}
	moved := 0
	arrived := map[[2]string]int{}
	for _, p := range parts {
		b, ok := prev[p.PartitionID]
		if ok && live[b] && next[p.PartitionID] != b {
			moved++
			if hold[b] {
				t.Fatalf("%s: %v moved off %s, which is HoldOnly", at, p.PartitionID, b)
			}
		}
		if !ok || b != next[p.PartitionID] {
			arrived[[2]string{next[p.PartitionID], p.Topic}]++
		}
	}
	if moved > lim.MaxMoves {
		t.Fatalf("%s: %d partitions moved off live brokers, max moves %d", at, moved, lim.MaxMoves)
	}
	v := view(brokers, parts, next)
	for k := range arrived {
		if hold[k[0]] {
			t.Fatalf("%s: %s, HoldOnly, was given partitions of topic %s", at, k[0], k[1])
		}
		if n, limit := v.count[k], v.limit(k[0], k[1]); n > limit {
			t.Fatalf("%s: broker %s was given partitions of topic %s beyond its limit (%d, limit %d)", at, k[0], k[1], n, limit)
		}
	}
	pv := view(brokers, parts, prev)
	if _, n, limit := pv.overLimit(); pv.complete() && n <= limit && pv.balanced(lim.Slack) && !same(prev, next) {
		t.Fatalf("%s: a stable placement (complete, within the limits and the slack) changed", at)
	}
}

// placed is an assignment as the tests measure it, from scratch, independently of
// place.go's bookkeeping. Limits, shares and balance are those of the brokers not
// HoldOnly, with the partitions they hold (a HoldOnly broker's stay out of it).
type placed struct {
	brokers map[string]Broker // not HoldOnly
	hold    map[string]bool   // every live broker: whether it is HoldOnly
	parts   []Partition
	a       Assignment
	load    map[string]float64
	count   map[[2]string]int // (broker, topic) -> partitions
	topic   map[string]int    // topic -> partitions not on HoldOnly brokers
	cap     float64           // of every broker not HoldOnly
	fair    float64           // load per unit of capacity, were it even
}

func view(brokers []Broker, parts []Partition, a Assignment) placed {
	v := placed{brokers: map[string]Broker{}, hold: map[string]bool{}, parts: parts, a: a, load: map[string]float64{},
		count: map[[2]string]int{}, topic: map[string]int{}}
	for _, b := range brokers {
		if b.Capacity <= 0 {
			b.Capacity = 1
		}
		if !b.HoldOnly {
			v.brokers[b.ID] = b
			v.cap += b.Capacity
		}
	}
	for _, b := range brokers {
		v.hold[b.ID] = b.HoldOnly
	}
	for _, p := range parts {
		b, ok := a[p.PartitionID]
		if v.hold[b] {
			continue
		}
		v.topic[p.Topic]++
		v.fair += p.Load
		if ok {
			v.load[b] += p.Load
			v.count[[2]string{b, p.Topic}]++
		}
	}
	v.fair /= v.cap
	return v
}

// limit is the spread limit of topic on broker b: its capacity's share of the topic's
// partitions, rounded up.
func (v placed) limit(b, topic string) int {
	return int(math.Ceil(float64(v.topic[topic])*v.brokers[b].Capacity/v.cap - 1e-9))
}

func (v placed) share(b string) float64 { return v.load[b] / v.brokers[b].Capacity }

// complete reports whether every partition is on a live broker.
func (v placed) complete() bool {
	for _, p := range v.parts {
		if _, ok := v.hold[v.a[p.PartitionID]]; !ok {
			return false
		}
	}
	return true
}

// overLimit returns the (broker, topic) furthest over its spread limit, its count and
// its limit.
func (v placed) overLimit() (k [2]string, n, limit int) {
	for kk, nn := range v.count {
		if _, ok := v.brokers[kk[0]]; !ok {
			continue
		}
		if l := v.limit(kk[0], kk[1]); nn-l > n-limit {
			k, n, limit = kk, nn, l
		}
	}
	return k, n, limit
}

// balanced reports whether no broker holds more than its fair share plus the slack (with
// a margin for rounding).
func (v placed) balanced(slack float64) bool {
	for b := range v.brokers {
		if v.share(b) > v.fair*(1+slack)-1e-6 {
			return false
		}
	}
	return true
}

// helpfulMove returns a move that would narrow the gap: a partition of a broker above
// its fair share plus slack to a broker with room for its topic, with both ending below
// the first one's share now.
func (v placed) helpfulMove(slack float64) (from string, p Partition, to string, ok bool) {
	for _, p := range v.parts {
		h := v.a[p.PartitionID]
		if _, ok := v.brokers[h]; !ok || v.share(h) <= v.fair*(1+slack)+1e-9 {
			continue
		}
		for j, b := range v.brokers {
			if j == h || v.count[[2]string{j, p.Topic}] >= v.limit(j, p.Topic) {
				continue
			}
			after := max((v.load[h]-p.Load)/v.brokers[h].Capacity, (v.load[j]+p.Load)/b.Capacity)
			if after < v.share(h)-1e-6 {
				return h, p, j, true
			}
		}
	}
	return "", Partition{}, "", false
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

// TestPlaceJoinInBoundedSteps: 64 partitions of one topic on two brokers; a third joins.
// The topic's spread limit drops from 32 to 22 a broker, yet each pass moves at most
// MaxMoves partitions (all 20 at once before: the limit evicted them in one pass), and
// the passes end with the three brokers even within the slack.
func TestPlaceJoinInBoundedSteps(t *testing.T) {
	var parts []Partition
	for i := range 64 {
		parts = append(parts, Partition{PartitionID{"t", i}, 1})
	}
	lim := Limits{MaxMoves: 2, Slack: 0.05}
	two := []Broker{{ID: "a", Capacity: 1}, {ID: "b", Capacity: 1}}
	a := settle(t, "two brokers", two, parts, Place(two, parts, nil, lim), lim)
	three := []Broker{two[0], two[1], {ID: "c", Capacity: 1}}
	passes := 0
	for ; ; passes++ {
		next := Place(three, parts, a, lim)
		checkPlacement(t, fmt.Sprintf("after the join, pass %d", passes), three, parts, a, next, lim)
		if same(a, next) {
			break
		}
		a = next
	}
	count := map[string]int{}
	for _, b := range a {
		count[b]++
	}
	if passes < 10 || count["a"] > 22 || count["b"] > 22 || count["c"] < 20 {
		t.Fatalf("after %d passes: %v, want at most 22 each (the limit) and 20 at least (within the slack), at most 2 moves a pass",
			passes, count)
	}
}

// TestPlaceSpreadByCapacity: a topic's spread limit follows capacity. One topic of 12
// equal partitions on brokers of capacity 1 and 2 ends 4 and 8 (a limit of 6 a broker,
// as it was, held the larger one to 6 and the smaller one at half again its share).
func TestPlaceSpreadByCapacity(t *testing.T) {
	var parts []Partition
	for i := range 12 {
		parts = append(parts, Partition{PartitionID{"t", i}, 1})
	}
	brokers := []Broker{{ID: "small", Capacity: 1}, {ID: "big", Capacity: 2}}
	lim := Limits{MaxMoves: 4, Slack: 0.1}
	a := settle(t, "capacities 1 and 2", brokers, parts, Place(brokers, parts, nil, lim), lim)
	count := map[string]int{}
	for _, b := range a {
		count[b]++
	}
	if count["small"] != 4 || count["big"] != 8 {
		t.Fatalf("placed %v, want small 4 and big 8", count)
	}
}
