package client

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"sluice/wire"
)

// pconn is one of a link's connections: the sender writes requests, a reader goroutine
// reads the answers, which come in request order.
type pconn struct {
	l    *link
	nc   net.Conn
	poll bool // carries empty produces only
	pair *connPair

	mu struct {
		sync.Mutex
		nextID  uint32
		pending []pending // requests without an answer, oldest first from head
		head    int
		dead    bool
	}
}

// pending is a request written (or being written) on a pconn.
type pending struct {
	id   uint32
	part int
	req  sendReq // without its batches
	at   int64   // when it was written (Producer.now): its round trip starts
}

func (c *pconn) dead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.dead
}

// pop removes the oldest pending request, which must have id.
func (c *pconn) pop(id uint32) (pending, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.head == len(c.mu.pending) || c.mu.pending[c.mu.head].id != id {
		return pending{}, false
	}
	pd := c.mu.pending[c.mu.head]
	c.mu.head++
	if c.mu.head >= 64 && 2*c.mu.head >= len(c.mu.pending) { // keep the array from creeping
		n := copy(c.mu.pending, c.mu.pending[c.mu.head:])
		c.mu.pending, c.mu.head = c.mu.pending[:n], 0
	}
	c.armLocked(c.mu.head < len(c.mu.pending))
	return pd, true
}

// armLocked sets the read deadline after the pending requests changed: with requests
// waiting (waiting), the next answer is due within the produce timeout from now (a
// broker that answers nothing for that long is hung: paused, or its host gone without a
// reset, which TCP keepalive never sees of a paused process); with none, the connection
// may stay quiet for good. One deadline per request written to an idle connection and
// per answer, not per record. Requires c.mu (send and pop arm under it, so an answer
// that empties the queue cannot clear the deadline of a request written meanwhile).
func (c *pconn) armLocked(waiting bool) {
	if waiting {
		c.nc.SetReadDeadline(time.Now().Add(c.l.p.cfg.produceTimeout()))
	} else {
		c.nc.SetReadDeadline(time.Time{})
	}
}

// readLoop is the reader goroutine: it decodes each answer and gives it to its window.
func (c *pconn) readLoop() {
	defer c.l.p.wg.Done()
	fr := frameReader{r: c.nc, maxFrame: c.l.p.cfg.maxFrame}
	var resp wire.Response
	for {
		frame, err := fr.next()
		if err == nil {
			_, err = resp.Decode(frame, fr.maxFrame)
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				// Hung: its partitions may have moved (the broker's session expired
				// meanwhile), and a reconnection to a paused process succeeds (the
				// kernel accepts): ask where they are now, and not that broker.
				c.l.p.admin.shun(c.l.addr)
				c.l.p.mu.Lock()
				c.l.p.refreshLocked()
				c.l.p.mu.Unlock()
			}
			c.l.broken(c, err)
			return
		}
		if resp.Header.APIKey != wire.APIProduce { // this connection sends nothing else
			c.l.broken(c, fmt.Errorf("cannot match answer %d: an answer of %v to a produce", resp.Header.RequestID, resp.Header.APIKey))
			return
		}
		pd, ok := c.pop(resp.Header.RequestID)
		if !ok {
			c.l.broken(c, fmt.Errorf("cannot match answer %d to a request", resp.Header.RequestID))
			return
		}
		c.l.deliver(c.poll, &pd, &resp)
	}
}

// deliver hands an answer to its window and acts on what the window says.
func (l *link) deliver(poll bool, pd *pending, resp *wire.Response) {
	body, _ := resp.Body.(*wire.ProduceResponse)
	code := resp.Header.Code
	p := l.p
	p.mu.Lock()
	w := p.mu.wins[pd.part]
	var act action
	if poll {
		act = w.onPoll(code, body, p.now(), int64(p.backoff(w.refusals+1)))
	} else {
		p.stages.answered(pd.at, p.now())
		act = w.onAnswer(&pd.req, code, body, p.now(), int64(p.backoff(w.refusals)))
	}
	switch act {
	case actRefresh:
		p.refreshLocked()
	case actFailed:
		if resp.Text != "" { // the broker's reason, with its details, in the error
			w.err = wire.NewError(code, resp.Text)
		}
		p.failLocked(fmt.Errorf("partition %d: %w", w.part, w.err))
	}
	p.finishExpansionLocked() // when this answer resolved the last draining window
	p.notifyLocked()
	p.mu.Unlock()
	l.wake()
}

// connPair is the two connections a link dials together, which die together.
type connPair struct {
	data, poll *pconn
	// lost runs link.lost once for the pair, before the sender writes on the next one.
	lost sync.Once
}

// end closes both connections of the pair and tells the windows, once, that their
// requests in flight on it will not be answered. Whoever finds the pair dead first runs
// it, a reader (broken) or the sender (conns); the other waits in the Once until the
// windows know, so the sender never writes a window's next request on a new connection
// while the window still counts the lost ones in flight. It did (a review): a reader
// that had killed its connection was still on its way to tell the windows when the
// sender, finding the connection dead, redialed and went on pipelining; the broker
// answered the gap with sequence_gap, and the window, which had not yet heard of the
// loss, panicked on an answer it could not place.
func (pr *connPair) end(l *link) {
	pr.data.kill()
	pr.poll.kill()
	pr.lost.Do(l.lost)
}

// broken closes both connections of c's pair after a failure on c and tells the windows
// that their requests in flight will not be answered (connPair.end). The sender then
// reconnects. The other connection's failure then finds the pair ended. err is not
// kept: the windows only need to know that the answers are lost. An older pair's
// connection (the sender has dialed since) closes its partner too: an idle poll
// connection has no deadline and would otherwise stay open, its reader with it, and
// Close wait for that reader for ever (a review found it).
func (l *link) broken(c *pconn, _ error) {
	c.pair.end(l)
}

// lost tells the windows of the link that the answers to their requests in flight will
// not come.
func (l *link) lost() {
	p := l.p
	p.mu.Lock()
	for i, w := range p.mu.wins {
		if p.mu.links[i] == l {
			w.connLost(p.now() + int64(p.cfg.backoffMin))
			w.pollLost()
		}
	}
	p.notifyLocked()
	p.mu.Unlock()
	l.wake()
}

// kill marks the connection dead, forgets its pending requests and closes it. It reports
// whether the connection was alive.
func (c *pconn) kill() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.dead {
		return false
	}
	c.mu.dead = true
	c.mu.pending, c.mu.head = nil, 0
	c.nc.Close()
	return true
}
