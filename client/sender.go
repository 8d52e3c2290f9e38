package client

import (
	"context"
	"net"
	"sync"
	"time"

	"sluice/internal/nanosleep"
	"sluice/wire"
)

// timerGranularity is how late Go's timers may fire here (they wake from the netpoller,
// whose timeout counts milliseconds): waits shorter than this use nanosleep.
const timerGranularity = time.Millisecond

// link is the producer's driver for one broker: two connections (data requests, and the
// empty produces that wait for the checkpoint, kept apart so that a long poll never holds
// up the answers to data), a sender goroutine that takes requests from the windows of the
// partitions this broker serves and writes them, and a reader goroutine per connection
// that hands answers back to the windows.
type link struct {
	p    *Producer
	addr string
	kick chan struct{} // wakes the sender; capacity 1
	// ctx ends when the producer closes or the link is retired (retireIdleLocked):
	// its sender stops redialing then.
	ctx  context.Context
	stop context.CancelFunc

	mu struct {
		sync.Mutex
		data, poll *pconn
		closed     bool
	}

	// Owned by the sender goroutine.
	reqs  []sendReq
	parts []int
	polls []sendReq
	pollp []int
	hbuf  []byte
	bufs  net.Buffers
	ends  []int
	timer *time.Timer
	// sleeper waits out lingers shorter than the timers' granularity (sleep); nil until
	// the first.
	sleeper *nanosleep.Sleeper
}

// linkLocked returns the link to addr, starting one if there is none.
func (p *Producer) linkLocked(addr string) *link {
	for _, l := range p.mu.every {
		if l.addr == addr {
			return l
		}
	}
	l := &link{p: p, addr: addr, kick: make(chan struct{}, 1)}
	l.ctx, l.stop = context.WithCancel(p.ctx)
	p.mu.every = append(p.mu.every, l)
	if p.startLink != nil {
		p.startLink(l)
		return l
	}
	p.wg.Add(1)
	go l.run()
	return l
}

// wake makes the sender look at its windows again. Safe from any goroutine.
func (l *link) wake() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// run is the sender goroutine.
func (l *link) run() {
	defer l.p.wg.Done()
	defer func() {
		if l.sleeper != nil {
			l.sleeper.Close()
		}
	}()
	l.timer = time.NewTimer(time.Hour)
	l.timer.Stop()
	for {
		data, poll, ok := l.conns()
		if !ok {
			return
		}
		if !l.sleep(l.round(data, poll)) {
			return
		}
	}
}

// round sends every request the windows of this link have ready, and returns when the
// sender must look again without being woken.
func (l *link) round(data, poll *pconn) int64 {
	p := l.p
	p.mu.Lock()
	now := p.now()
	l.reqs, l.parts, l.polls, l.pollp = l.reqs[:0], l.parts[:0], l.polls[:0], l.pollp[:0]
	wakeAt := int64(never)
	for i, w := range p.mu.wins {
		if p.mu.links[i] != l {
			continue
		}
		for w.nextRequest(now, grow(&l.reqs)) {
			l.parts = append(l.parts, i)
		}
		l.reqs = l.reqs[:len(l.parts)]
		if w.nextPoll(now, grow(&l.polls)) {
			l.pollp = append(l.pollp, i)
		}
		l.polls = l.polls[:len(l.pollp)]
		wakeAt = min(wakeAt, w.wakeAt(now))
	}
	p.mu.Unlock()
	okData := l.send(data, l.reqs, l.parts, 0)
	okPoll := l.send(poll, l.polls, l.pollp, uint32(max(p.cfg.pollWait/time.Millisecond, 1)))
	p.mu.Lock()
	for i := range l.reqs {
		p.mu.wins[l.parts[i]].writeDone(&l.reqs[i])
	}
	p.mu.Unlock()
	if !okData || !okPoll {
		// The connection died before or while the requests went out: whoever killed it
		// may have told the windows before they handed these out.
		l.lost()
	}
	return wakeAt
}

// grow extends *s by one element, reusing what its array already holds (the batches
// slice of an old element), and returns a pointer to the new last element.
func grow(s *[]sendReq) *sendReq {
	if len(*s) < cap(*s) {
		*s = (*s)[:len(*s)+1]
	} else {
		*s = append(*s, sendReq{})
	}
	return &(*s)[len(*s)-1]
}

// send registers the requests with the connection and writes them with one writev: each
// frame header, then the batches straight from the windows' buffers. It reports false
// when the connection is dead or the write failed.
func (l *link) send(c *pconn, reqs []sendReq, parts []int, waitMs uint32) bool {
	if len(reqs) == 0 {
		return true
	}
	l.hbuf, l.ends = l.hbuf[:0], l.ends[:0]
	now := l.p.now()
	c.mu.Lock()
	if c.mu.dead {
		c.mu.Unlock()
		return false
	}
	if c.mu.head == len(c.mu.pending) { // idle until now: the answer timeout starts
		c.armLocked(true)
	}
	for i := range reqs {
		r := &reqs[i]
		c.mu.nextID++
		pr := wire.ProduceRequest{Topic: l.p.topicB, Partition: uint32(parts[i]), Version: r.version,
			Session: r.session, ProducerID: r.pid, WaitDurableMs: waitMs}
		hdr := wire.RequestHeader{APIKey: wire.APIProduce, RequestID: c.mu.nextID}
		l.hbuf = pr.AppendFrameHeader(l.hbuf, hdr, r.size)
		l.ends = append(l.ends, len(l.hbuf))
		c.mu.pending = append(c.mu.pending, pending{id: c.mu.nextID, part: parts[i], req: *r, at: now})
		c.mu.pending[len(c.mu.pending)-1].req.batches = nil
	}
	c.mu.Unlock()
	l.bufs = l.bufs[:0]
	start := 0
	for i := range reqs {
		l.bufs = append(l.bufs, l.hbuf[start:l.ends[i]])
		start = l.ends[i]
		for _, b := range reqs[i].batches {
			l.bufs = append(l.bufs, b.buf)
		}
	}
	bufs := l.bufs
	_, err := bufs.WriteTo(c.nc)
	clear(l.bufs)
	if err != nil {
		l.broken(c, err)
		return false
	}
	if waitMs == 0 { // data requests: their batches' queue stage ends here
		now := l.p.now()
		for i := range reqs {
			l.p.stages.written(reqs[i].batches, now)
		}
	}
	return true
}

// sleep waits until woken or wakeAt; false when the producer stops.
func (l *link) sleep(wakeAt int64) bool {
	if wakeAt != never {
		d := time.Duration(wakeAt - l.p.now())
		if d <= 0 {
			return true
		}
		if d < timerGranularity {
			// A timer would fire a millisecond late at best (a 200 µs linger would last
			// 1 ms): a wait this short sleeps on a timerfd instead (nanosleep.Sleeper: the
			// goroutine parks, its P runs the application's goroutines meanwhile), two
			// system calls per linger, not per record. A wake-up meanwhile (a batch
			// filled) is taken after it, at most d late.
			if l.sleeper == nil {
				l.sleeper, _ = nanosleep.NewSleeper() // without a timerfd, it sleeps in nanosleep(2)
			}
			l.sleeper.Sleep(d)
			return l.ctx.Err() == nil
		}
		l.timer.Reset(d)
		defer l.timer.Stop()
	}
	select {
	case <-l.kick:
	case <-l.timer.C:
	case <-l.ctx.Done():
		return false
	}
	return true
}

// conns returns the link's connections, connecting with backoff while they are missing
// or broken; ok is false when the producer stops, or fails because the broker refused
// its credentials.
func (l *link) conns() (data, poll *pconn, ok bool) {
	l.mu.Lock()
	data, poll = l.mu.data, l.mu.poll
	l.mu.Unlock()
	if data != nil && !data.dead() && !poll.dead() {
		return data, poll, true
	}
	if data != nil {
		data.pair.end(l) // the windows forget the dead pair's requests before any new one goes out
	}
	cfg := &l.p.cfg
	for delay, fails := cfg.backoffMin, 1; ; fails++ {
		data, poll, err := l.dial()
		if err == nil {
			return data, poll, true
		}
		if permanent(err) { // the credentials were refused: no reconnection cures that
			l.p.mu.Lock()
			l.p.failLinkLocked(l, err)
			l.p.mu.Unlock()
			return nil, nil, false
		}
		if fails%3 == 0 { // the partitions may have moved
			l.p.mu.Lock()
			l.p.refreshLocked()
			l.p.mu.Unlock()
		}
		if sleepCtx(l.ctx, jitter(delay)) != nil {
			return nil, nil, false
		}
		delay = min(2*delay, cfg.backoffMax)
	}
}

// dial opens both connections and starts their readers.
func (l *link) dial() (data, poll *pconn, err error) {
	nd, err := dial(l.ctx, &l.p.cfg, l.addr)
	if err != nil {
		return nil, nil, err
	}
	np, err := dial(l.ctx, &l.p.cfg, l.addr)
	if err != nil {
		nd.Close()
		return nil, nil, err
	}
	data, poll = &pconn{l: l, nc: nd}, &pconn{l: l, nc: np, poll: true}
	data.pair = &connPair{data: data, poll: poll}
	poll.pair = data.pair
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		nd.Close()
		np.Close()
		return nil, nil, ErrClosed
	}
	l.mu.data, l.mu.poll = data, poll
	l.p.wg.Add(2)
	go data.readLoop()
	go poll.readLoop()
	return data, poll, nil
}

// shutdown closes the connections for good; the goroutines then end.
func (l *link) shutdown() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.closed = true
	for _, c := range []*pconn{l.mu.data, l.mu.poll} {
		if c != nil {
			c.nc.Close()
		}
	}
}
