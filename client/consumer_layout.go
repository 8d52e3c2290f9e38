package client

import (
	"context"
	"math"
	"time"
)

// A consumer across topic expansions (layout.go has the rule): each partition is
// delivered up to a bound, the end of its current segment, or its position itself while
// that segment's gate is closed; a partition that reaches its bound is held: it leaves
// the fetchers until its gate opens (other partitions' positions moved, or the view
// learned their switches). The view is read at start and again when a batch's stamp
// says it is behind, while a partition is held, and every layoutsEvery (a cheap metadata
// read first: the layouts only when the topic's version moved or a switch is unknown),
// which is also how the consumer finds the new partitions of an expansion.

const (
	// layoutsEvery is how often the consumer looks for a newer layout of its topic.
	layoutsEvery = 2 * time.Second
	// heldRecheck is how often the layouts are read again while a partition is held.
	heldRecheck = 100 * time.Millisecond
)

// loadLayouts reads the topic's layouts into the view and adds the partitions of a newer
// layout that the consumer reads, from their start (their records are all newer than
// anything the consumer read).
func (c *Consumer) loadLayouts(ctx context.Context) error {
	ls, err := c.admin.TopicLayouts(ctx, c.topic)
	if err != nil {
		return err
	}
	c.lvChecked = time.Now()
	if len(c.lv.ls) > 0 && ls[len(ls)-1].Version < c.lv.last().Version {
		return nil // a broker behind: keep what is known
	}
	c.lv.ls, c.stale, c.regate = ls, false, true
	have := map[int]bool{}
	for _, p := range c.parts {
		have[p.id] = true
	}
	added := false
	for j := range int(c.lv.last().Partitions) {
		if !have[j] && c.lv.reads(j) && c.started {
			c.parts = append(c.parts, &cpart{id: j})
			added = true
		}
	}
	if added {
		c.indexParts()
		c.refresh(ctx) // their addresses
	}
	return nil
}

// followLayouts reads the layouts when due and releases the held partitions whose gates
// opened. Whenever the set of partitions to fetch changes, the fetchers stop: the next
// ones start from the cursors, without the held partitions.
func (c *Consumer) followLayouts(ctx context.Context) error {
	held := false
	for _, p := range c.parts {
		held = held || p.held
	}
	since := time.Since(c.lvChecked)
	switch {
	case c.stale || (held && since >= heldRecheck) || (since >= layoutsEvery && !c.lv.complete()):
		if err := c.loadLayouts(ctx); err != nil {
			return err
		}
	case since >= layoutsEvery:
		c.lvChecked = time.Now()
		t, err := c.admin.topic(ctx, c.topic)
		if err != nil {
			return err
		}
		if t.Version > c.lv.last().Version {
			if err := c.loadLayouts(ctx); err != nil {
				return err
			}
		}
	}
	for _, p := range c.parts {
		if p.held {
			if limit, _ := c.bound(p); limit > p.cur.next {
				p.held, c.regate = false, true
			}
		}
	}
	if c.regate {
		c.regate = false
		if c.fetchers != nil {
			c.stopFetchers()
		}
	}
	return nil
}

// bound returns how far partition p may be delivered from its cursor, and the newest
// layout stamp its batches may carry there.
func (c *Consumer) bound(p *cpart) (int64, uint16) {
	if len(c.lv.ls) == 1 {
		return math.MaxInt64, uint16(c.lv.ls[0].Version) // never expanded: no gate
	}
	return c.lv.bound(p.id, p.cur.next, c.position)
}

// position returns the next offset to deliver of partition id (0 for one not read).
func (c *Consumer) position(id int) int64 {
	if id < len(c.byID) && c.byID[id] != nil {
		return c.byID[id].cur.next
	}
	return 0
}

// hold takes p out of the fetchers until its gate opens; stale says the view is behind
// (a batch stamped with a newer layout).
func (c *Consumer) hold(p *cpart, stale bool) {
	p.held, c.regate = true, true
	c.stale = c.stale || stale
}

// indexParts rebuilds byID.
func (c *Consumer) indexParts() {
	n := 0
	for _, p := range c.parts {
		n = max(n, p.id+1)
	}
	c.byID = make([]*cpart, n)
	for _, p := range c.parts {
		c.byID[p.id] = p
	}
}

// fetchable reports whether some partition is not held.
func (c *Consumer) fetchable() bool {
	for _, p := range c.parts {
		if !p.held {
			return true
		}
	}
	return false
}
