package client

import (
	"context"
	"errors"
	"slices"
	"time"

	"sluice/wire"
)

// A broker that goes down takes its own lanes down, not the consumer: the partitions of
// the other brokers keep coming while the consumer tries the failed lanes again (with
// backoff, after asking the metadata: the partitions may have moved), from the cursors
// of the records it delivered.
//
// That restart point is exact: a fetcher hands over its error after every answer it
// read, and Poll takes an answer only once the application is done with the one before
// (Next returned false), so when the error is taken every record the lane fetched has
// been delivered and the partitions' cursors stand right after them. A lane does not
// redial by itself instead: its fetch positions run ahead of what was delivered (it asks
// for the next answer before the application read this one), and its partitions may
// have moved to another broker.

// laneMetadata is the topic's metadata asked for the down lanes (reviveAsk).
type laneMetadata struct {
	t     wire.Topic
	err   error
	asked time.Time // when it was asked for
}

// await waits for the next answer of the running fetchers, starting failed lanes again
// as they come due. It returns a data answer, or an error answer that concerns every
// lane (Poll then stops them all); a lane's own failure it handles (laneFailed).
func (c *Consumer) await(ctx context.Context) (*answer, error) {
	for {
		var due <-chan time.Time
		var timer *time.Timer
		if !c.down.empty() && c.revived == nil {
			wait := time.Until(c.down.next())
			if wait <= 0 {
				if !c.reviveAsk() {
					return nil, ErrClosed
				}
				continue
			}
			timer = time.NewTimer(wait) // only while a lane is down: no timer per answer
			due = timer.C
		}
		var a *answer
		select {
		case a = <-c.ready:
		case m := <-c.revived:
			c.revived = nil
			c.revive(m)
		case <-due:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.stop:
			return nil, ErrClosed
		}
		if timer != nil {
			timer.Stop()
		}
		if a != nil {
			if a.err == nil {
				if a.f.fresh { // the lane delivers: its next failure backs off from the start
					a.f.fresh = false
					for _, p := range a.f.parts {
						p.backoff = 0
					}
				}
				return a, nil
			}
			if !c.laneFailed(a) {
				return a, nil
			}
		}
	}
}

// laneFailed takes the lane of error answer a out of the running fetchers and puts its
// partitions down, to start again after a backoff, when the failure is the lane's own
// (a connection lost, a retriable code) and other lanes run. It reports whether it did;
// otherwise the failure goes to Poll, which stops every lane: a permanent error, a
// broker to read with an older fetch version, a partition to read with the single fetch,
// or the last lane running.
func (c *Consumer) laneFailed(a *answer) bool {
	var sf *singleFetchError
	var ob *oldBrokerError
	if len(c.fetchers) < 2 || c.closed() || !retriable(a.err) || errors.As(a.err, &sf) || errors.As(a.err, &ob) {
		return false
	}
	f := a.f
	c.fetchers = slices.DeleteFunc(c.fetchers, func(g *fetcher) bool { return g == f })
	c.mu.Lock()
	f.stopLocked()
	c.mu.fetchers = slices.Clone(c.fetchers)
	c.mu.Unlock()
	delay := laneBackoff(f.parts, c.cfg.backoffMin, c.cfg.backoffMax)
	now := time.Now()
	c.down.add(slices.Clone(f.parts), now, now.Add(jitter(delay)))
	return true
}

// laneBackoff returns how long a lane of parts that just failed waits before it starts
// again, and records it in each part: the backoff's minimum after a lane that delivered,
// else twice the longest wait of its parts since, up to the maximum. Each lane keeps its
// own: the lanes of a broker that flaps for minutes wait up to the maximum, and those of
// another broker that fails once meanwhile start again after the minimum. (They shared
// one wait before: a lane that failed joined the wait of the lanes down already, and
// every revive doubled it for all of them.)
func laneBackoff(parts []*cpart, minDelay, maxDelay time.Duration) time.Duration {
	delay := minDelay
	for _, p := range parts {
		delay = max(delay, min(2*p.backoff, maxDelay))
	}
	for _, p := range parts {
		p.backoff = delay
	}
	return delay
}

// downLanes are the partitions of the failed lanes, each lane's with the time it may
// start again. Owned by the goroutine calling Poll.
type downLanes struct {
	lanes []downLane
}

type downLane struct {
	parts  []*cpart
	failed time.Time // when the lane failed
	at     time.Time // when it may start again
}

func (d *downLanes) add(parts []*cpart, failed, at time.Time) {
	d.lanes = append(d.lanes, downLane{parts: parts, failed: failed, at: at})
}

func (d *downLanes) empty() bool { return len(d.lanes) == 0 }

// next returns when the first lane is due; the zero time when none is down.
func (d *downLanes) next() time.Time {
	var first time.Time
	for _, l := range d.lanes {
		if first.IsZero() || l.at.Before(first) {
			first = l.at
		}
	}
	return first
}

// takeDue removes the lanes due at now that failed before asked (the metadata to
// start them with was asked for after their failure), and returns their partitions.
func (d *downLanes) takeDue(now, asked time.Time) []*cpart {
	var parts []*cpart
	d.lanes = slices.DeleteFunc(d.lanes, func(l downLane) bool {
		if l.at.After(now) || !l.failed.Before(asked) {
			return false
		}
		parts = append(parts, l.parts...)
		return true
	})
	return parts
}

// reviveAsk asks the topic's metadata for the down lanes, in the background (the broker
// asked may be the one that is down: Poll goes on with the other lanes meanwhile); the
// answer comes on c.revived. The ask gives up after the dial timeout, or when the
// consumer closes (Close closes the Admin, then waits for the asks: c.asks). It reports
// false, asking nothing, once the consumer is closing: an ask is counted in c.asks under
// c.mu, before Close closes c.stop under c.mu and then waits for them, or not at all (a
// WaitGroup's Add must not race its Wait: the race detector caught this Add running
// beside Close's Wait).
func (c *Consumer) reviveAsk() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed() {
		return false
	}
	c.asks.Add(1)
	ch := make(chan laneMetadata, 1)
	c.revived = ch
	asked := time.Now()
	go func() {
		defer c.asks.Done()
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.dialTimeout)
		defer cancel()
		t, err := c.admin.topic(ctx, c.topic)
		ch <- laneMetadata{t: t, err: err, asked: asked}
	}()
	return true
}

// revive starts the lanes that are due again (the others wait for their own time), at
// the addresses the metadata m gives (or those known, when it could not be read: a
// broker restarted in place). A lane that failed after m was asked for waits for the
// next ask, due at once: m may name the broker it just lost. A partition with no broker
// now waits for one with the unrouted (followAddresses). A lane's backoff doubles at
// each failure until a lane of its partitions delivers an answer (laneBackoff).
func (c *Consumer) revive(m laneMetadata) {
	parts := c.down.takeDue(time.Now(), m.asked)
	var up []*cpart
	for _, p := range parts {
		if m.err == nil && p.id < len(m.t.Partitions) {
			p.addr = m.t.Partitions[p.id].Addr
		}
		switch {
		case p.held: // a regate is due: the next Poll starts every lane
		case p.addr == "":
			p.unrouted = true
		default:
			up = append(up, p)
		}
	}
	fs := c.lanes(up)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed() {
		c.runLocked(fs)
	}
}
