package test

// The client fault tests' helpers: a frame-aware TCP proxy between the Go client and a
// real broker process (testbroker), and the records they produce and check.
//
// The proxy is fault injection the real network cannot do on demand: it parses the
// length-prefixed frames in both directions and, per frame, may forward half of it and
// reset both sides, reset after forwarding it whole, drop it and reset, stall a
// direction, or turn the broker's address into a black hole that accepts connections
// and never answers. A loopback connection never does any of that by itself, so these
// are the only tests that put the client's reconnect, resend and close paths through
// losses at exact points of the protocol.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sluice/client"
	"sluice/internal/loopport"
	"sluice/wire"
)

// proxyDir is a direction through the proxy.
type proxyDir int

const (
	toBroker proxyDir = iota // client to broker: requests
	toClient                 // broker to client: answers
)

// verdict is what the proxy does with one frame.
type verdict int

const (
	pass      verdict = iota
	cutHalf           // forward half of the frame, then reset both sides
	dropReset         // forward nothing of it, reset both sides
	passReset         // forward it whole, then reset both sides
)

// frameInfo describes a frame for a policy.
type frameInfo struct {
	conn   int64
	dir    proxyDir
	api    uint16 // the request's API key (for answers, from the answer's header)
	id     uint32
	size   int
	nbatch int // produce request: length of its batches (0: an empty produce, a poll)
}

// faultProxy forwards connections from addr to upstream (the broker), frame by frame.
type faultProxy struct {
	ln       net.Listener
	addr     string
	upstream string
	policy   atomic.Pointer[func(frameInfo) verdict]
	// stall[d]: frames in direction d wait until it is false again.
	stall     [2]atomic.Bool
	blackhole atomic.Bool // new connections are accepted and never served
	nconn     atomic.Int64
	mu        sync.Mutex
	conns     map[int64][2]net.Conn
	wg        sync.WaitGroup
	closed    atomic.Bool
}

// startFaultProxy listens on a free loopback port whose address is as long as
// upstream's (answers that carry the broker's address get the proxy's in its place,
// byte for byte, so that the client keeps going through the proxy), and closes the
// proxy and every connection through it when the test ends.
func startFaultProxy(t testing.TB, upstream string) *faultProxy {
	t.Helper()
	var ln net.Listener
	for attempt := 0; ln == nil; attempt++ {
		if attempt == 20 {
			t.Fatalf("no free loopback port with an address as long as %s", upstream)
		}
		addr, err := loopport.Addr()
		if err != nil {
			t.Fatal(err)
		}
		if len(addr) != len(upstream) {
			continue
		}
		if ln, err = net.Listen("tcp", addr); err != nil {
			ln = nil // taken in between: pick again
		}
	}
	p := &faultProxy{ln: ln, addr: ln.Addr().String(), upstream: upstream, conns: map[int64][2]net.Conn{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *faultProxy) setPolicy(f func(frameInfo) verdict) {
	if f == nil {
		p.policy.Store(nil)
		return
	}
	p.policy.Store(&f)
}

func (p *faultProxy) close() {
	if p.closed.Swap(true) {
		return
	}
	p.ln.Close()
	p.resetAll()
	p.wg.Wait()
}

// resetAll resets every open connection.
func (p *faultProxy) resetAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, cs := range p.conns {
		resetConn(cs[0])
		resetConn(cs[1])
		delete(p.conns, id)
	}
}

// resetConn closes c with an RST rather than a FIN.
func resetConn(c net.Conn) {
	if c == nil {
		return
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

func (p *faultProxy) accept() {
	defer p.wg.Done()
	for {
		cc, err := p.ln.Accept()
		if err != nil {
			return
		}
		id := p.nconn.Add(1)
		if p.blackhole.Load() {
			p.mu.Lock()
			p.conns[id] = [2]net.Conn{cc, nil}
			p.mu.Unlock()
			continue // never read, never answered, never closed (until resetAll)
		}
		bc, err := net.Dial("tcp", p.upstream)
		if err != nil {
			resetConn(cc)
			continue
		}
		p.mu.Lock()
		if p.closed.Load() { // close's resetAll has run: nobody would reset these
			p.mu.Unlock()
			resetConn(cc)
			resetConn(bc)
			return
		}
		p.conns[id] = [2]net.Conn{cc, bc}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pump(id, toBroker, cc, bc)
		go p.pump(id, toClient, bc, cc)
	}
}

func (p *faultProxy) kill(id int64) {
	p.mu.Lock()
	cs, ok := p.conns[id]
	delete(p.conns, id)
	p.mu.Unlock()
	if ok {
		resetConn(cs[0])
		resetConn(cs[1])
	}
}

// pump copies frames from src to dst, applying the policy to each.
func (p *faultProxy) pump(id int64, d proxyDir, src, dst net.Conn) {
	defer p.wg.Done()
	defer p.kill(id)
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(src, hdr[:]); err != nil {
			return
		}
		n := binary.LittleEndian.Uint32(hdr[:])
		if n > 80<<20 {
			return
		}
		frame := make([]byte, 4+int(n))
		copy(frame, hdr[:])
		if _, err := io.ReadFull(src, frame[4:]); err != nil {
			return
		}
		fi := frameInfo{conn: id, dir: d, size: len(frame)}
		if d == toBroker && len(frame) >= 12 {
			fi.api = binary.LittleEndian.Uint16(frame[4:])
			fi.id = binary.LittleEndian.Uint32(frame[8:])
			if fi.api == 0 && len(frame) >= 14 { // produce: the batches' length at 30+n of the body
				tn := int(binary.LittleEndian.Uint16(frame[12:]))
				if off := 12 + 30 + tn; len(frame) >= off+4 {
					fi.nbatch = int(binary.LittleEndian.Uint32(frame[off:]))
				}
			}
		}
		if d == toClient && len(frame) >= 12 {
			fi.id = binary.LittleEndian.Uint32(frame[4:])
			fi.api = binary.LittleEndian.Uint16(frame[8:])
			switch fi.api {
			case 2, 3, 4, 8: // answers that carry addresses: the broker's becomes the proxy's
				frame = bytes.ReplaceAll(frame, []byte(p.upstream), []byte(p.addr))
			}
		}
		for p.stall[d].Load() {
			time.Sleep(5 * time.Millisecond)
			if p.closed.Load() {
				return
			}
		}
		v := pass
		if f := p.policy.Load(); f != nil {
			v = (*f)(fi)
		}
		switch v {
		case pass:
			if _, err := dst.Write(frame); err != nil {
				return
			}
		case cutHalf:
			dst.Write(frame[:len(frame)/2])
			time.Sleep(time.Millisecond)
			return
		case dropReset:
			return
		case passReset:
			dst.Write(frame)
			time.Sleep(2 * time.Millisecond)
			return
		}
	}
}

// faultValue makes a value carrying a producer tag and a sequence, padded to size.
func faultValue(tag uint32, seq uint64, size int) []byte {
	v := make([]byte, max(size, 12))
	binary.LittleEndian.PutUint32(v, tag)
	binary.LittleEndian.PutUint64(v[4:], seq)
	return v
}

// faultRec is a record read back: where it is and what faultValue put in it.
type faultRec struct {
	part   int
	offset int64
	tag    uint32
	seq    uint64
}

func takeFaultRec(c *client.Consumer) faultRec {
	r := c.Record()
	return faultRec{part: c.Partition(), offset: r.Offset,
		tag: binary.LittleEndian.Uint32(r.Value), seq: binary.LittleEndian.Uint64(r.Value[4:])}
}

func createFaultTopic(t testing.TB, addr, topic string, parts int) {
	t.Helper()
	a, err := client.NewAdmin(client.Brokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := a.CreateTopic(ctx, topic, parts, wire.TopicOptions{}); err != nil {
		t.Fatal(err)
	}
}

// readAllFaultRecs reads every partition up to its high watermark, straight from the
// broker (not through the proxy).
func readAllFaultRecs(t testing.TB, addr, topic string) []faultRec {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := client.NewAdmin(client.Brokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	d, err := a.DescribeTopic(ctx, topic)
	a.Close()
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]int64{}
	for i, p := range d.Partitions {
		if p.NextOffset > p.LogStartOffset {
			want[i] = p.NextOffset
		}
	}
	c, err := client.NewConsumer(ctx, topic, client.Brokers(addr), client.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []faultRec
	for len(want) > 0 {
		if err := c.Poll(ctx); err != nil {
			t.Fatalf("poll after %d records: %v (left %v)", len(out), err, want)
		}
		for c.Next() {
			r := takeFaultRec(c)
			out = append(out, r)
			if r.offset+1 >= want[r.part] {
				delete(want, r.part)
			}
		}
		if err := c.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// produceUntil runs g goroutines that each call produce, with goroutine index i and the
// next sequence number, until d has passed or a call fails (reported with t.Error), and
// returns how many sequence numbers were taken.
func produceUntil(t *testing.T, g int, d time.Duration, produce func(i int, seq uint64) error) uint64 {
	t.Helper()
	var wg sync.WaitGroup
	var seq atomic.Uint64
	deadline := time.Now().Add(d)
	for i := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if err := produce(i, seq.Add(1)-1); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return seq.Load()
}

// requireOnce fails the test unless recs hold each of tag's records 0..n-1 exactly once.
func requireOnce(t *testing.T, recs []faultRec, tag uint32, n uint64) {
	t.Helper()
	if dups, missing, _ := checkFaultRecs(recs, tag, n); len(dups) > 0 || len(missing) > 0 {
		t.Fatalf("tag %d, %d records: %d dups %v, %d missing %v", tag, n, len(dups), firstFew(dups), len(missing), firstFew(missing))
	}
}

// closeWithin closes p with a context of 5 s and fails the test, listing the client's
// goroutines, when Close has not returned after bound (what is the context for, if
// Close outlives it).
func closeWithin(t *testing.T, p *client.Producer, bound time.Duration, what string) {
	t.Helper()
	closed := make(chan error, 1)
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer ccancel()
	go func() { closed <- p.Close(cctx) }()
	select {
	case err := <-closed:
		if err != nil {
			t.Logf("%s: Close: %v", what, err)
		}
	case <-time.After(bound):
		t.Fatalf("%s: Close(ctx of 5s) has not returned after %v; client goroutines:\n%s",
			what, bound, strings.Join(clientGoroutines(), "\n"))
	}
}

// checkFaultRecs lists tag's duplicates and order violations (per partition), and
// which of 0..n-1 are missing.
func checkFaultRecs(recs []faultRec, tag uint32, n uint64) (dups []string, missing []uint64, reorder []string) {
	seen := map[uint64]faultRec{}
	last := map[int]int64{}
	for _, r := range recs {
		if r.tag != tag {
			continue
		}
		if prev, ok := seen[r.seq]; ok {
			dups = append(dups, fmt.Sprintf("seq %d at %d/%d and %d/%d", r.seq, prev.part, prev.offset, r.part, r.offset))
			continue
		}
		if l, ok := last[r.part]; ok && int64(r.seq) < l {
			reorder = append(reorder, fmt.Sprintf("seq %d after %d in partition %d at %d", r.seq, l, r.part, r.offset))
		}
		last[r.part] = int64(r.seq)
		seen[r.seq] = r
	}
	for i := range n {
		if _, ok := seen[i]; !ok {
			missing = append(missing, i)
		}
	}
	return
}

// firstFew is the start of s, for messages.
func firstFew[T any](s []T) []T { return s[:min(len(s), 5)] }

// clientGoroutines returns the stacks of the goroutines running in package client.
func clientGoroutines() []string {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "sluice/client.") && !strings.Contains(g, "clientGoroutines") {
			out = append(out, g)
		}
	}
	return out
}
