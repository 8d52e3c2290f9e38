package broker

import (
	"sluice/wire"
)

// routes returns partition id's engine.PartitionConfig.Routes: the logical ids it serves
// in the layout a produced batch is stamped with, looked up in its topic's layouts at
// the time of the produce (an expansion adds layouts).
func (b *Broker) routes(t *topic, id int) func(stamp uint16) (lo, hi int, ok bool) {
	return func(stamp uint16) (int, int, bool) { return b.logicalRange(t, id, stamp) }
}

// logicalRange returns the logical ids partition id of t serves in the layout of the
// topic version whose low 16 bits are stamp, the newest such version at most t's current
// one: [lo, hi), empty when the partition was not in that layout. ok is false for a
// stamp that names no layout t knows (before its first, or too far back for 16 bits).
// It reads t's layouts under b.mu, in place: no allocation on the produce path.
func (b *Broker) logicalRange(t *topic, id int, stamp uint16) (lo, hi int, ok bool) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	v := t.meta.Version
	back := uint32(uint16(v) - stamp) // how many versions back the stamp is
	if back > v || back >= 1<<15 {
		return 0, 0, false
	}
	version := v - back
	partitions := 0
	if len(t.meta.History) == 0 {
		if version == v {
			partitions = t.meta.Partitions
		}
	} else {
		for _, l := range t.meta.History { // oldest first: the last at or below version
			if l.Version <= version {
				partitions = l.Partitions
			}
		}
	}
	switch {
	case partitions == 0:
		return 0, 0, false
	case id >= partitions:
		return 0, 0, true
	}
	lo, hi = wire.LogicalRange(id, partitions)
	return lo, hi, true
}
