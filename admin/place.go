package admin

import (
	"cmp"
	"math"
	"slices"
)

// Placement. The leader computes where every partition goes from the live brokers, the
// partitions with their load, and where they are now; the brokers load and unload to
// match. It follows Swift's admin ("flatten", swift-notes.md) in bounded steps: a
// partition stays on its broker while that broker lives; the homeless (new partitions, a
// dead broker's) all go at once to the live broker left least loaded by each, with room
// for its topic; then at most MaxMoves moves a pass, first of partitions over their
// topic's spread limit on a broker (a broker that joins lowers every limit), then from
// the relatively most loaded brokers to the least while that narrows the gap. Without a
// cause (a death, a new partition, a limit exceeded, a broker above its fair share plus
// the slack) nothing moves. A HoldOnly broker (one the leader cannot read) keeps what it
// holds and is given nothing. Pure: no ZooKeeper here, so a model test can drive it
// through joins, deaths and load changes.

// PartitionID names a physical partition.
type PartitionID struct {
	Topic string
	ID    int
}

// Broker is a live broker as the leader sees it.
type Broker struct {
	ID string
	// Capacity weighs the broker's share (1 for every broker when unknown): a broker of
	// capacity 2 is given twice the load of one of capacity 1, and twice the partitions
	// of a topic.
	Capacity float64
	// HoldOnly marks a live broker the leader knows nothing more of (its registration
	// cannot be read): it keeps the partitions it holds, which never move off it while it
	// lives (it may still serve them), and is given none. Its partitions and capacity
	// count in no other broker's limits or share.
	HoldOnly bool
}

// Partition is a partition to place, with its load (measured bytes/s or a static weight;
// at least a small positive floor so that idle partitions spread too).
type Partition struct {
	PartitionID
	Load float64
}

// Limits bound placement.
type Limits struct {
	// MaxMoves bounds the partitions moved off live brokers in one pass, for the topic
	// limits and for balance together (a broker that joins gets its share over several
	// passes, not all at once). Placing a new partition or a dead broker's is not a move.
	MaxMoves int
	// Slack is how much more than its fair share (relative: 0.1 is 10 %) a broker may
	// hold before partitions move off it for balance alone.
	Slack float64
}

// Assignment maps a partition to the broker that serves it.
type Assignment map[PartitionID]string

// Place returns where every partition goes: prev kept where its broker is live, the
// rest (new partitions, a dead broker's) placed by load within the topics' spread
// limits, then at most MaxMoves moves for the limits and for balance. A topic's spread
// limit on a broker is its capacity's share of the topic's partitions, rounded up (of the
// partitions and capacity not HoldOnly). A partition it has no broker for (none live, or
// only HoldOnly ones) is left out. It never places a partition twice and never on a
// broker not in brokers.
func Place(brokers []Broker, parts []Partition, prev Assignment, lim Limits) Assignment {
	out := make(Assignment, len(parts))
	if len(brokers) == 0 {
		return out
	}
	st := newState(brokers, parts)
	var homeless []Partition
	for _, p := range parts {
		b, ok := prev[p.PartitionID]
		if ok && st.live(b) {
			st.put(p, b, out)
			if st.brokers[st.index[b]].HoldOnly {
				st.count[p.Topic]-- // spread over the others: what they hold
			}
			continue
		}
		homeless = append(homeless, p)
	}
	if st.capacity == 0 {
		return out // only HoldOnly brokers: nowhere to place the homeless
	}
	// Heaviest first, in a fixed order so that the result does not depend on the
	// caller's: large items first pack best.
	slices.SortFunc(homeless, func(a, b Partition) int {
		if c := cmp.Compare(b.Load, a.Load); c != 0 {
			return c
		}
		return comparePID(a.PartitionID, b.PartitionID)
	})
	for _, p := range homeless {
		if b := st.target(p, ""); b != "" {
			st.put(p, b, out)
		}
	}
	moves := st.spread(out, lim.MaxMoves)
	st.rebalance(out, lim.MaxMoves-moves, lim.Slack)
	return out
}

func comparePID(a, b PartitionID) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// eps absorbs the rounding of loads summed and taken away again: a move must narrow the
// gap by more than that, so that rounding never makes partitions swap back and forth.
const eps = 1e-9

// state is a placement under way.
type state struct {
	brokers  []Broker
	index    map[string]int
	load     []float64        // per broker
	topics   []map[string]int // per broker: partitions of each topic
	count    map[string]int   // per topic: its partitions, but those on HoldOnly brokers
	capacity float64          // of every broker but the HoldOnly ones
	parts    map[PartitionID]Partition
}

func newState(brokers []Broker, parts []Partition) *state {
	st := &state{brokers: slices.Clone(brokers), index: map[string]int{}, count: map[string]int{},
		parts: make(map[PartitionID]Partition, len(parts))}
	slices.SortFunc(st.brokers, func(a, b Broker) int { return cmp.Compare(a.ID, b.ID) })
	for i := range st.brokers {
		if st.brokers[i].Capacity <= 0 {
			st.brokers[i].Capacity = 1
		}
		st.index[st.brokers[i].ID] = i
		if !st.brokers[i].HoldOnly {
			st.capacity += st.brokers[i].Capacity
		}
	}
	st.load = make([]float64, len(st.brokers))
	st.topics = make([]map[string]int, len(st.brokers))
	for i := range st.topics {
		st.topics[i] = map[string]int{}
	}
	for _, p := range parts {
		st.count[p.Topic]++
		st.parts[p.PartitionID] = p
	}
	return st
}

func (st *state) live(b string) bool { _, ok := st.index[b]; return ok }

// limit is the spread limit of topic on broker i (not HoldOnly): at most its capacity's
// share of the topic's partitions, rounded up. The limits add up to at least the topic's
// partitions, so some broker always has room for one more.
func (st *state) limit(i int, topic string) int {
	return int(math.Ceil(float64(st.count[topic])*st.brokers[i].Capacity/st.capacity - eps))
}

// room reports whether broker i may be given one more partition of topic.
func (st *state) room(i int, topic string) bool {
	return !st.brokers[i].HoldOnly && st.topics[i][topic] < st.limit(i, topic)
}

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

func (st *state) move(p Partition, to string, out Assignment) {
	st.take(p, out)
	st.put(p, to, out)
}

// share returns broker i's load relative to its capacity.
func (st *state) share(i int) float64 { return st.load[i] / st.brokers[i].Capacity }

// target returns the broker, other than not, with room for one more partition of p's
// topic whose relative load would be the least with p ("" for none); by id on ties.
func (st *state) target(p Partition, not string) string {
	best, bestShare := -1, 0.0
	for i, b := range st.brokers {
		if b.ID == not || !st.room(i, p.Topic) {
			continue
		}
		if s := (st.load[i] + p.Load) / b.Capacity; best < 0 || s < bestShare {
			best, bestShare = i, s
		}
	}
	if best < 0 {
		return ""
	}
	return st.brokers[best].ID
}

// spread moves partitions off brokers over a topic's spread limit, at most budget of
// them, and returns how many it moved: each time the lightest partition of the topic a
// broker exceeds most (heavier ones keep their place) to the broker target picks.
func (st *state) spread(out Assignment, budget int) int {
	moves := 0
	for ; moves < budget; moves++ {
		from, topic, over := -1, "", 0
		for i := range st.brokers {
			if st.brokers[i].HoldOnly {
				continue
			}
			for t, n := range st.topics[i] {
				if e := n - st.limit(i, t); e > over || (e == over && e > 0 && t < topic) {
					from, topic, over = i, t, e
				}
			}
		}
		if from < 0 {
			break
		}
		var pick *Partition
		for pid, b := range out {
			if p := st.parts[pid]; b == st.brokers[from].ID && p.Topic == topic && (pick == nil || lighter(p, *pick)) {
				pick = &p
			}
		}
		to := st.target(*pick, st.brokers[from].ID)
		if to == "" {
			break // cannot be: the limits leave room beyond a broker over its own
		}
		st.move(*pick, to, out)
	}
	return moves
}

// lighter orders partitions by load, then by id.
func lighter(a, b Partition) bool {
	return a.Load < b.Load || (a.Load == b.Load && comparePID(a.PartitionID, b.PartitionID) < 0)
}

// rebalance moves up to budget partitions, each from the relatively most loaded broker
// that holds more than its fair share plus slack and has a move that narrows the gap, to
// the broker target picks: the smallest partition whose move leaves both brokers below
// the first one's share now.
func (st *state) rebalance(out Assignment, budget int, slack float64) {
	var total float64
	for i := range st.brokers {
		if !st.brokers[i].HoldOnly {
			total += st.load[i]
		}
	}
	over := total / st.capacity * (1 + slack)
	for range max(budget, 0) {
		heavy := make([]int, 0, len(st.brokers))
		for i := range st.brokers {
			if !st.brokers[i].HoldOnly && st.share(i) > over+eps {
				heavy = append(heavy, i)
			}
		}
		slices.SortStableFunc(heavy, func(a, b int) int { return cmp.Compare(st.share(b), st.share(a)) })
		moved := false
		for _, h := range heavy {
			if p, to, ok := st.relief(h, out); ok {
				st.move(p, to, out)
				moved = true
				break
			}
		}
		if !moved {
			return
		}
	}
}

// relief returns the smallest partition of broker h whose move narrows the gap, and
// where to.
func (st *state) relief(h int, out Assignment) (Partition, string, bool) {
	var pick Partition
	var to string
	for pid, b := range out {
		if b != st.brokers[h].ID {
			continue
		}
		p := st.parts[pid]
		dst := st.target(p, b)
		if dst == "" {
			continue
		}
		j := st.index[dst]
		after := max((st.load[h]-p.Load)/st.brokers[h].Capacity, (st.load[j]+p.Load)/st.brokers[j].Capacity)
		if after >= st.share(h)-eps {
			continue // it would only move the peak
		}
		if to == "" || lighter(p, pick) {
			pick, to = p, dst
		}
	}
	return pick, to, to != ""
}
