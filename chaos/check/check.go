package check

import (
	"cmp"
	"fmt"
	"iter"
	"slices"
)

// maxExamples bounds the examples a report keeps of each anomaly.
const maxExamples = 10

// Anomaly names, as in the report's table and JSON.
const (
	Lost           = "lost"
	Duplicated     = "duplicated"
	Reordered      = "reordered"
	Inconsistent   = "inconsistent"
	Unexpected     = "unexpected"
	LostAccepted   = "lost-accepted"
	Damaged        = "damaged"
	Rewritten      = "rewritten"
	Unacknowledged = "unacknowledged"
)

// Forbidden lists the anomalies sluice's guarantees rule out (doc.go), in report order;
// Allowed the ones it permits, counted.
var (
	Forbidden = []string{Lost, Duplicated, Reordered, Inconsistent, Unexpected}
	Allowed   = []string{LostAccepted, Damaged, Rewritten, Unacknowledged}
)

// where is a position in the topic.
type where struct {
	part int
	off  int64
}

// Check finds the anomalies of a history.
func Check(h *History) *Report {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := newReport()
	r.Sent = len(h.mu.sends)
	for _, a := range h.mu.sends {
		r.Acks[a.String()]++
	}
	final := r.finalReads(h.mu.reads.all(), h.mu.sends, h.mu.cuts)
	r.Reads += h.mu.repeats
	r.Repeats = h.mu.repeats
	r.checkDuplicates(final)
	r.checkOrder(final)
	r.checkMissing(final, h.mu.sends, h.mu.damaged, h.mu.placed)
	return r
}

// finalReads checks every read for unexpected values and returns what the reads at or
// below C say each position holds, counting positions whose reads disagree.
func (r *Report) finalReads(reads iter.Seq2[int, Read], sends map[ID]Ack, cuts []cut) map[where]ID {
	final := map[where]ID{}
	conflict := map[where]bool{}
	for i, rd := range reads {
		if superseded(i, rd, cuts) {
			rd.Durable = false // what a cut destroyed is like a read above C
		}
		r.Reads++
		if !rd.Valid {
			r.add(Unexpected, "partition %d offset %d: a value the harness never wrote (or damaged)", rd.Partition, rd.Offset)
			continue
		}
		if a, ok := sends[rd.ID]; !ok || a == AckFailed {
			r.add(Unexpected, "partition %d offset %d: %v, never sent or sent as failed", rd.Partition, rd.Offset, rd.ID)
			continue
		}
		if !rd.Durable {
			continue
		}
		w := where{rd.Partition, rd.Offset}
		if old, ok := final[w]; ok && old != rd.ID && !conflict[w] {
			conflict[w] = true
			r.add(Inconsistent, "partition %d offset %d: read as %v and as %v, both at or below C", w.part, w.off, old, rd.ID)
		} else if !ok {
			final[w] = rd.ID
		}
	}
	for i, rd := range reads {
		stale := !rd.Durable || superseded(i, rd, cuts)
		if id, ok := final[where{rd.Partition, rd.Offset}]; ok && rd.Valid && stale && id != rd.ID {
			r.add(Rewritten, "partition %d offset %d: %v read above C or before a cut, later %v", rd.Partition, rd.Offset, rd.ID, id)
		}
	}
	return final
}

// superseded reports whether read i, rd, was of a position that a later cut destroyed.
func superseded(i int, rd Read, cuts []cut) bool {
	for _, c := range cuts {
		if i < c.reads && rd.Partition == c.part && rd.Offset >= c.from {
			return true
		}
	}
	return false
}

// checkDuplicates counts records held at more than one position.
func (r *Report) checkDuplicates(final map[where]ID) {
	at := map[ID][]where{}
	for w, id := range final {
		at[id] = append(at[id], w)
	}
	r.Distinct = len(at)
	for id, ws := range at {
		if len(ws) > 1 {
			slices.SortFunc(ws, cmpWhere)
			r.add(Duplicated, "%v at %d positions, first partition %d offset %d, then partition %d offset %d",
				id, len(ws), ws[0].part, ws[0].off, ws[1].part, ws[1].off)
		}
	}
}

func cmpWhere(a, b where) int {
	return cmp.Or(cmp.Compare(a.part, b.part), cmp.Compare(a.off, b.off))
}

// checkOrder walks each partition in offset order: a producer's sequence must grow.
func (r *Report) checkOrder(final map[where]ID) {
	ws := make([]where, 0, len(final))
	for w := range final {
		ws = append(ws, w)
	}
	slices.SortFunc(ws, cmpWhere)
	type key struct {
		part     int
		producer uint64
	}
	last := map[key]ID{}
	lastAt := map[key]int64{}
	for _, w := range ws {
		id := final[w]
		k := key{w.part, id.Producer}
		if prev, ok := last[k]; ok && id.Seq < prev.Seq {
			r.add(Reordered, "partition %d: producer %d sequence %d at offset %d after %d at offset %d",
				w.part, id.Producer, id.Seq, w.off, prev.Seq, lastAt[k])
		}
		last[k], lastAt[k] = id, w.off
	}
}

// checkMissing counts records sent and never read at or below C, by their ack.
func (r *Report) checkMissing(final map[where]ID, sends map[ID]Ack, damaged map[ID]bool, placed map[ID]where) {
	read := make(map[ID]bool, len(final))
	for _, id := range final {
		read[id] = true
	}
	ids := make([]ID, 0, len(sends))
	for id := range sends {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b ID) int {
		return cmp.Or(cmp.Compare(a.Producer, b.Producer), cmp.Compare(a.Seq, b.Seq))
	})
	for _, id := range ids {
		a := sends[id]
		switch {
		case a == AckUnknown:
			r.add(Unacknowledged, "%v: outcome unknown, read=%v", id, read[id])
		case read[id] || a == AckFailed:
		case damaged[id]: // whatever its ack: the fault destroyed it
			r.add(Damaged, "%v: acknowledged %v, destroyed by an injected file fault", id, a)
		case a == AckAccepted:
			r.add(LostAccepted, "%v: acknowledged accepted, never read at or below C", id)
		default:
			r.add(Lost, "%v: acknowledged persisted, never read at or below C%s", id, placedAt(id, placed, final))
		}
	}
}

// placedAt describes where a lost record was placed by its producer's answer, and what
// was read there instead ("" when the answer did not say).
func placedAt(id ID, placed map[ID]where, final map[where]ID) string {
	w, ok := placed[id]
	if !ok {
		return ""
	}
	if other, ok := final[w]; ok {
		return fmt.Sprintf(" (placed at partition %d offset %d, which holds %v)", w.part, w.off, other)
	}
	return fmt.Sprintf(" (placed at partition %d offset %d, never read)", w.part, w.off)
}
