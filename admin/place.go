package admin

import (
	"cmp"
	"slices"
)

// Placement. The leader computes where every partition goes from the live brokers, the
// partitions with their load, and where they are now; the brokers load and unload to
// match. It follows Swift's admin ("flatten", swift-notes.md): a partition stays where
// it is unless its broker died or holds more of its topic than its share; the rest go to
// the least loaded live broker with room for the topic; then, in bounded steps, partitions
// move from the most to the least loaded broker while that narrows the gap. Pure: no
// ZooKeeper here, so a model test can drive it through joins, deaths and load changes.

// PartitionID names a physical partition.
type PartitionID struct {
	Topic string
	ID    int
}

// Broker is a live broker as the leader sees it.
type Broker struct {
	ID string
	// Capacity weighs the broker's share (1 for every broker when unknown): a broker of
	// capacity 2 is given twice the load of one of capacity 1.
	Capacity float64
}

// Partition is a partition to place, with its load (measured bytes/s or a static weight;
// at least a small positive floor so that idle partitions spread too).
type Partition struct {
	PartitionID
	Load float64
}

// Limits bound placement.
type Limits struct {
	// MaxMoves bounds the moves a rebalance makes in one pass (a broker that joins gets
	// its share over several passes, not all at once).
	MaxMoves int
	// Slack is how much more than its fair share (relative: 0.1 is 10 %) a broker may
	// hold before partitions move off it for balance alone.
	Slack float64
}

// Assignment maps a partition to the broker that serves it.
type Assignment map[PartitionID]string

// Place returns where every partition goes: prev kept where its broker is live and the
// topic's spread limit allows, the rest (new partitions, a dead broker's, those over a
// limit) placed by load, then at most MaxMoves moves for balance. With no live broker it
// returns an empty assignment. It never places a partition twice and never on a broker
// not in brokers.
func Place(brokers []Broker, parts []Partition, prev Assignment, lim Limits) Assignment {
	out := Assignment{}
	if len(brokers) == 0 {
		return out
	}
	st := newState(brokers, parts)
	// Stay where possible, in a fixed order so that the result does not depend on map
	// iteration: heavier partitions first keep their place when a topic is over its limit.
	order := slices.Clone(parts)
	slices.SortFunc(order, func(a, b Partition) int {
		if c := cmp.Compare(b.Load, a.Load); c != 0 {
			return c
		}
		return comparePID(a.PartitionID, b.PartitionID)
	})
	var homeless []Partition
	for _, p := range order {
		if b, ok := prev[p.PartitionID]; ok && st.live(b) && st.topicCount(b, p.Topic) < st.limit[p.Topic] {
			st.put(p, b, out)
			continue
		}
		homeless = append(homeless, p)
	}
	for _, p := range homeless {
		st.put(p, st.lightest(p.Topic, ""), out)
	}
	st.rebalance(out, lim)
	return out
}

func comparePID(a, b PartitionID) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// state is a placement under way.
type state struct {
	brokers []Broker
	index   map[string]int
	load    []float64        // per broker
	topics  []map[string]int // per broker: partitions of each topic
	limit   map[string]int   // per topic: at most this many on one broker
	parts   map[PartitionID]Partition
}

func newState(brokers []Broker, parts []Partition) *state {
	st := &state{brokers: slices.Clone(brokers), index: map[string]int{}, limit: map[string]int{},
		parts: map[PartitionID]Partition{}}
	slices.SortFunc(st.brokers, func(a, b Broker) int { return cmp.Compare(a.ID, b.ID) })
	for i := range st.brokers {
		if st.brokers[i].Capacity <= 0 {
			st.brokers[i].Capacity = 1
		}
		st.index[st.brokers[i].ID] = i
	}
	st.load = make([]float64, len(st.brokers))
	st.topics = make([]map[string]int, len(st.brokers))
	for i := range st.topics {
		st.topics[i] = map[string]int{}
	}
	counts := map[string]int{}
	for _, p := range parts {
		counts[p.Topic]++
		st.parts[p.PartitionID] = p
	}
	for topic, n := range counts { // a topic's partitions spread: ceil(P / brokers) on one
		st.limit[topic] = (n + len(st.brokers) - 1) / len(st.brokers)
	}
	return st
}

func (st *state) live(b string) bool { _, ok := st.index[b]; return ok }

func (st *state) topicCount(b, topic string) int { return st.topics[st.index[b]][topic] }

func (st *state) put(p Partition, b string, out Assignment) {
	i := st.index[b]
	st.load[i] += p.Load
	st.topics[i][p.Topic]++
	out[p.PartitionID] = b
}

func (st *state) take(p Partition, out Assignment) {
	i := st.index[out[p.PartitionID]]
	st.load[i] -= p.Load
	st.topics[i][p.Topic]--
	delete(out, p.PartitionID)
}

// share returns broker i's load relative to its capacity.
func (st *state) share(i int) float64 { return st.load[i] / st.brokers[i].Capacity }

// lightest returns the broker with the least relative load that has room for one more
// partition of topic, other than not ("" for none); by id on ties. The topic limits
// always leave one: limit × brokers ≥ partitions.
func (st *state) lightest(topic, not string) string {
	best := -1
	for i, b := range st.brokers {
		if b.ID == not || st.topics[i][topic] >= st.limit[topic] {
			continue
		}
		if best < 0 || st.share(i) < st.share(best) {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return st.brokers[best].ID
}

// rebalance moves up to MaxMoves partitions, each from the relatively most loaded broker
// to the least loaded one that can take it, while the most loaded holds more than its
// fair share plus slack and the move narrows the gap.
func (st *state) rebalance(out Assignment, lim Limits) {
	var total, capacity float64
	for i := range st.brokers {
		total += st.load[i]
		capacity += st.brokers[i].Capacity
	}
	fair := total / capacity
	for moves := 0; moves < lim.MaxMoves; moves++ {
		heavy := 0
		for i := range st.brokers {
			if st.share(i) > st.share(heavy) {
				heavy = i
			}
		}
		if st.share(heavy) <= fair*(1+lim.Slack) {
			return
		}
		// The smallest partition on it whose move helps.
		var pick *Partition
		var to string
		for pid, b := range out {
			if b != st.brokers[heavy].ID {
				continue
			}
			p := st.parts[pid]
			dst := st.lightest(p.Topic, b)
			if dst == "" {
				continue
			}
			j := st.index[dst]
			after := max((st.load[heavy]-p.Load)/st.brokers[heavy].Capacity, (st.load[j]+p.Load)/st.brokers[j].Capacity)
			if after >= st.share(heavy) {
				continue // it would only move the peak
			}
			if pick == nil || p.Load < pick.Load || (p.Load == pick.Load && comparePID(p.PartitionID, pick.PartitionID) < 0) {
				pick, to = &p, dst
			}
		}
		if pick == nil {
			return
		}
		st.take(*pick, out)
		st.put(*pick, to, out)
	}
}
