package netio

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"sluice/wire"
)

// Hostile tests of the reads netio makes itself (receive.go): budget accounting around
// them, frames cut at gnet's 1 KiB read, bad headers, streams that end or reset inside a
// frame, paused connections and many connections against a small budget.

// produceFrame returns a produce request frame of exactly size bytes (its fixed part at
// least), request id id, its batches taken from random at off, and the batches' CRC (what
// echoHandler answers).
func produceFrame(id uint32, size, off int) ([]byte, uint32) {
	hdr := wire.RequestHeader{APIKey: wire.APIProduce, RequestID: id}
	body := wire.ProduceRequest{Topic: []byte("t"), Version: 1}
	fixed := len((&wire.Request{Header: hdr, Body: &body}).AppendTo(nil))
	if size < fixed {
		panic(fmt.Sprintf("a produce frame takes at least %d bytes", fixed))
	}
	body.Batches = random[off : off+size-fixed]
	return (&wire.Request{Header: hdr, Body: &body}).AppendTo(nil), crc32.ChecksumIEEE(body.Batches)
}

// fixedProduce is the size of sendAll's produce frame with no batches.
func fixedProduce() int {
	req := wire.Request{Header: wire.RequestHeader{APIKey: wire.APIProduce},
		Body: &wire.ProduceRequest{Topic: []byte("t"), Version: 1}}
	return len(req.AppendTo(nil))
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// expectAnswer reads one answer and checks its request id and code.
func expectAnswer(t *testing.T, r io.Reader, id uint32, code wire.Code) *wire.Response {
	t.Helper()
	resp, err := readAnswer(r)
	if err != nil {
		t.Fatalf("answer to request %d: %v", id, err)
	}
	if resp.Header.RequestID != id || resp.Header.Code != code {
		t.Fatalf("answer to request %d: request %d, code %v (%s), want code %v", id, resp.Header.RequestID,
			resp.Header.Code, resp.Text, code)
	}
	return resp
}

// TestReadAheadChargesWhatItRead: a read ahead between frames charges the inbound budget
// for 64 KiB before it reads; what it did not fill must be given back. Here each of 48
// connections sends a frame of exactly gnet's 1 KiB read followed by the first 20 bytes of
// its next frame (a producer in the middle of a write), so netio reads ahead and gets 20
// bytes. Each holds 20 bytes, one page; 48 pages are far below the 2 MiB budget, and no
// connection may be refused. Every frame is then completed and answered.
func TestReadAheadChargesWhatItRead(t *testing.T) {
	s := startTestServer(t, Config{MaxFrame: 1 << 20, MaxInboundTotal: 2 << 20}) // small holdings: 64 KiB
	const conns = 48
	first, _ := produceFrame(0, gnetReadCap, 0)
	next, crc := produceFrame(1, 200, 4096)
	var cs []net.Conn
	var rs []*bufio.Reader
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	for i := range conns {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
		c.SetDeadline(time.Now().Add(time.Minute))
		if _, err := c.Write(append(append([]byte(nil), first...), next[:20]...)); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(c)
		rs = append(rs, r)
		expectAnswer(t, r, 0, wire.CodeNone)
		waitFor(t, fmt.Sprintf("connection %d's partial frame", i), func() bool {
			st := s.Stats()
			return st.RefusedBudget+st.RefusedConnLimit > 0 || st.BytesHeld+st.BytesReceived >= uint64(20*(i+1))
		})
	}
	st := s.Stats()
	t.Logf("%d connections holding 20 bytes each: %d bytes charged", conns, st.InboundBuffered)
	if st.RefusedBudget+st.RefusedConnLimit != 0 {
		t.Fatalf("%d connections holding 20 bytes each against a 2 MiB budget: %d refused (%d bytes charged)",
			conns, st.RefusedBudget+st.RefusedConnLimit, st.InboundBuffered)
	}
	if st.InboundBuffered > conns*pageSize {
		t.Fatalf("%d connections holding 20 bytes each are charged %d bytes", conns, st.InboundBuffered)
	}
	for i, c := range cs {
		if _, err := c.Write(next[20:]); err != nil {
			t.Fatal(err)
		}
		resp := expectAnswer(t, rs[i], 1, wire.CodeNone)
		if uint32(resp.Body.(*wire.ProduceResponse).BaseOffset) != crc {
			t.Fatalf("connection %d: wrong batches", i)
		}
	}
	for _, c := range cs {
		c.Close()
	}
	cs = nil
	if st := settled(t, s); st.InboundBuffered != 0 {
		t.Fatalf("%d bytes still charged", st.InboundBuffered)
	}
}

// TestIdleAfterReadAheadHoldsNothing: a connection whose read ahead found the socket empty
// holds no buffer and no charge while it idles, and the buffer it gave back is not charged
// to the next connection as if the read ahead had filled it.
func TestIdleAfterReadAheadHoldsNothing(t *testing.T) {
	s := startTestServer(t, Config{MaxFrame: 1 << 20, MaxInboundTotal: 2 << 20})
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	r := bufio.NewReader(c)
	for i := range 8 {
		f, _ := produceFrame(uint32(i), gnetReadCap, i)
		if _, err := c.Write(f); err != nil {
			t.Fatal(err)
		}
		expectAnswer(t, r, uint32(i), wire.CodeNone)
		// The answer is written by whoever gives it (send.go), here the loop in the middle
		// of its read ahead: it can reach the client before the loop lets the buffer go.
		// The idle connection must come to hold nothing, not hold nothing the moment the
		// answer arrives (this asked that, and failed 3 runs in 24 on a loaded host).
		waitFor(t, "the idle connection's charge to go", func() bool { return s.Stats().InboundBuffered == 0 })
	}
	// The pooled buffer now goes to a connection that holds 2 bytes: it costs a page.
	c2, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.SetDeadline(time.Now().Add(time.Minute))
	f, _ := produceFrame(0, gnetReadCap-2, 0)
	g, _ := produceFrame(1, 100, 0)
	if _, err := c2.Write(append(append([]byte(nil), f...), g[:2]...)); err != nil {
		t.Fatal(err)
	}
	r2 := bufio.NewReader(c2)
	expectAnswer(t, r2, 0, wire.CodeNone)
	waitFor(t, "the two bytes held", func() bool { return s.Stats().BytesHeld >= 2 })
	// As above, the answer may arrive before the read ahead after the two bytes ends: the
	// charge must come down to a page, and stay there (the defect charged the whole
	// pooled buffer for as long as the bytes were held).
	waitFor(t, "a page's charge for 2 bytes held", func() bool { return s.Stats().InboundBuffered <= pageSize })
	time.Sleep(50 * time.Millisecond)
	if st := s.Stats(); st.InboundBuffered > pageSize {
		t.Fatalf("a connection holding 2 bytes is charged %d bytes", st.InboundBuffered)
	}
	if _, err := c2.Write(g[2:]); err != nil {
		t.Fatal(err)
	}
	expectAnswer(t, r2, 1, wire.CodeNone)
}

// holdingHandler answers nothing by itself: the test answers the requests it hands over.
type holdingHandler struct{ reqs chan heldRequest }

type heldRequest struct {
	c   *Conn
	sl  Slot
	hdr wire.RequestHeader
}

func (holdingHandler) Serving(string) {}

func (h holdingHandler) Handle(c *Conn, sl Slot, req *wire.Request) {
	h.reqs <- heldRequest{c, sl, req.Header}
}

func (r heldRequest) answer() {
	resp := wire.Response{Header: wire.ResponseHeader{RequestID: r.hdr.RequestID, APIKey: r.hdr.APIKey},
		Body: &wire.ProduceResponse{}}
	r.c.Respond(r.sl, Response{Head: resp.AppendTo(nil), File: -1})
}

func startHoldingServer(t *testing.T, cfg Config) (*Server, holdingHandler) {
	t.Helper()
	h := holdingHandler{reqs: make(chan heldRequest, 1024)}
	cfg.Listen, cfg.Loops = "127.0.0.1:0", 1
	s, err := Start(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Stop(ctx)
	})
	return s, h
}

func nextRequest(t *testing.T, h holdingHandler, id uint32) heldRequest {
	t.Helper()
	select {
	case r := <-h.reqs:
		if r.hdr.RequestID != id {
			t.Fatalf("request %d handed over, want %d", r.hdr.RequestID, id)
		}
		return r
	case <-time.After(20 * time.Second):
		t.Fatalf("request %d not handed over", id)
	}
	panic("unreachable")
}

// TestPausedConnectionRefusedRead: a connection at MaxInflight whose buffer has a consumed
// front holds a whole frame and the start of another when netio's own read of the rest is
// refused (the two would pass MaxInbound). The refusal compacts the buffer and gives back
// the pages of its consumed front; the charge must follow (checkInbound panics under the
// invariants tag otherwise, killing the broker). The connection is then refused, as it
// must be, once what it holds passes MaxInbound, with busy to the frame it had not taken.
func TestPausedConnectionRefusedRead(t *testing.T) {
	s, h := startHoldingServer(t, Config{MaxFrame: 16 << 10, MaxInbound: 16 << 10, MaxInflight: 1})
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	f1, _ := produceFrame(0, 100, 0)
	f2, _ := produceFrame(1, 5000, 0)
	f3, _ := produceFrame(2, 8000, 0)
	g, _ := produceFrame(3, 9000, 0)
	if _, err := c.Write(f1); err != nil {
		t.Fatal(err)
	}
	r1 := nextRequest(t, h, 0)
	if _, err := c.Write(append(append([]byte(nil), f2...), f3...)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the two frames held", func() bool { st := s.Stats(); return st.BytesHeld+st.BytesReceived >= 13000 })
	r1.answer() // f2 is taken from the front of the buffer; f3 waits
	r2 := nextRequest(t, h, 1)
	if _, err := c.Write(g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the connection refused", func() bool { return s.Stats().RefusedConnLimit > 0 })
	r2.answer()
	r := bufio.NewReader(c)
	expectAnswer(t, r, 0, wire.CodeNone)
	expectAnswer(t, r, 1, wire.CodeNone)
	expectAnswer(t, r, 2, wire.CodeBusy)
	c.Close()
	if st := settled(t, s); st.InboundBuffered != 0 {
		t.Fatalf("%d bytes still charged", st.InboundBuffered)
	}
}

// TestRoomRefusedAfterShedKeepsChargeInLine drives the reader's bookkeeping directly: a
// connection holds 2 bytes of a frame behind a consumed 40000-byte frame when the budget
// (nearly spent by others) refuses the growth of its buffer for a read ahead. Asking
// sheds the consumed front's pages; the charge must come down with them.
func TestRoomRefusedAfterShedKeepsChargeInLine(t *testing.T) {
	cfg := Config{MaxFrame: 1 << 20, MaxInboundTotal: 2 << 20}
	cfg.EnsureDefaults()
	s := &Server{cfg: cfg, inBudget: newInboundBudget(&cfg)}
	s.bufs.retain = 16 << 20
	defer s.bufs.close()
	// A pooled 128 KiB buffer, all of it resident: the growth would take it.
	m, err := s.bufs.get(128 << 10)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.mem {
		m.mem[i] = 1
	}
	m.touched = len(m.mem)
	s.bufs.put(m)

	c := &Conn{srv: s}
	f, _ := produceFrame(0, 40000, 0)
	if action := c.hold(append(append([]byte(nil), f...), 0, 1)); action != gnet.None || c.closeNext {
		t.Fatalf("hold: action %v", action)
	}
	c.in.consume(&s.bufs, len(f)) // handed over
	c.recharge()
	c.checkInbound()
	// Other connections, each holding little, hold all but 8 KiB of the budget.
	var others []int64
	for free := s.inBudget.limit - s.inBudget.held() - 8<<10; free > 0; {
		n := min(free, s.inBudget.smallHold)
		if s.inBudget.resize(0, n) != admitted {
			t.Fatal("the others' charge was refused")
		}
		others = append(others, n)
		free -= n
	}
	othersHeld := s.inBudget.held() - c.held
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if got := c.receive(fds[0], c.in.len()+readAhead); got != 0 {
		t.Fatalf("read %d bytes from an empty socket", got)
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("after a refused read: %v", r)
			}
		}()
		c.checkInbound()
	}()
	if c.held > cost(len(c.in.mem), c.in.touched) {
		t.Fatalf("charged %d for a buffer whose resident pages cost %d", c.held, cost(len(c.in.mem), c.in.touched))
	}
	if want := othersHeld + c.held; s.inBudget.held() != want {
		t.Fatalf("budget holds %d, want %d", s.inBudget.held(), want)
	}
	c.dropInbound()
	for _, n := range others {
		s.inBudget.resize(n, 0)
	}
	if s.inBudget.held() != 0 {
		t.Fatalf("budget holds %d after everything was released", s.inBudget.held())
	}
}

// TestFramesAroundTheFirstRead: frames of sizes around gnet's 1 KiB read, and pairs whose
// second frame starts anywhere in the last 20 bytes of that read (its length field or
// header cut by it), followed by small, just-over-1-KiB, large and reserved frames, on
// connections that take every request and on connections that take one at a time.
func TestFramesAroundTheFirstRead(t *testing.T) {
	for _, inflight := range []int{1, 64} {
		s := startTestServer(t, Config{MaxFrame: 16 << 20, MaxInflight: inflight, MaxInboundTotal: 64 << 20})
		fixed := fixedProduce()
		pay := func(size int) []byte { return random[size%4096 : size%4096+size-fixed] }
		var sizes [][]int
		for _, n := range []int{gnetReadCap - 1, gnetReadCap, gnetReadCap + 1, 2 * gnetReadCap, 2*gnetReadCap + 1} {
			sizes = append(sizes, []int{n, n, n, n})
		}
		for k := 0; k <= 20; k++ {
			for _, second := range []int{fixed, 100, gnetReadCap + 1, 70 << 10, 3 << 20} {
				sizes = append(sizes, []int{gnetReadCap - k, second, 200})
			}
		}
		for _, ss := range sizes {
			var payloads [][]byte
			for _, n := range ss {
				payloads = append(payloads, pay(n))
			}
			st := sendAll(t, s, payloads)
			if st.RefusedBudget+st.RefusedConnLimit+st.ProtocolErrs+st.FramesTimedOut != 0 {
				t.Fatalf("inflight %d, frames %v: %+v", inflight, ss, st)
			}
		}
	}
}

// badHeaders are frame headers the server refuses, with the code it answers.
var badHeaders = []struct {
	name string
	hdr  func(body int) []byte
	code wire.Code
}{
	{"unknown API", func(body int) []byte { return header(uint32(8+body), 999, 0) }, wire.CodeUnknownAPI},
	{"wrong version", func(body int) []byte { return header(uint32(8+body), uint16(wire.APIProduce), 7) }, wire.CodeUnsupportedVersion},
	{"too large", func(body int) []byte { return header(64<<20, uint16(wire.APIProduce), 0) }, wire.CodeFrameTooLarge},
}

func header(length uint32, api, version uint16) []byte {
	b := binary.LittleEndian.AppendUint32(nil, length)
	b = binary.LittleEndian.AppendUint16(b, api)
	b = binary.LittleEndian.AppendUint16(b, version)
	return binary.LittleEndian.AppendUint32(b, 77)
}

// TestBadHeaderCutByFirstRead: a frame with a bad header whose header (not its length
// field) is cut by gnet's 1 KiB read is refused from the header before netio reads its
// 1 MiB body; the frame before it is answered first.
func TestBadHeaderCutByFirstRead(t *testing.T) {
	s := startTestServer(t, Config{MaxFrame: 16 << 20})
	for _, bad := range badHeaders {
		for k := 4; k <= wire.RequestHeaderSize; k++ { // bytes of the bad header in the first read
			t.Run(fmt.Sprintf("%s/%d", bad.name, k), func(t *testing.T) {
				before := s.Stats().BytesReceived
				first, _ := produceFrame(0, gnetReadCap-k, 0)
				body := 1 << 20
				stream := append(append(append([]byte(nil), first...), bad.hdr(body)...), random[:body]...)
				c, err := net.Dial("tcp", s.Addr())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(time.Minute))
				go c.Write(stream)
				r := bufio.NewReader(c)
				expectAnswer(t, r, 0, wire.CodeNone)
				resp, err := readAnswer(r)
				if err != nil {
					t.Fatal(err)
				}
				if resp.Header.Code != bad.code {
					t.Fatalf("code %v (%s), want %v", resp.Header.Code, resp.Text, bad.code)
				}
				if _, err := readAnswer(r); err == nil {
					t.Fatal("the connection was not closed")
				}
				c.Close()
				st := settled(t, s)
				// netio read the rest of the header and nothing more (a frame too large is
				// refused from its length field, before that).
				want := uint64(wire.RequestHeaderSize - k)
				if bad.code == wire.CodeFrameTooLarge {
					want = 0
				}
				if st.BytesReceived-before != want || st.InboundBuffered != 0 {
					t.Fatalf("netio read %d bytes itself, want %d; %d charged", st.BytesReceived-before, want, st.InboundBuffered)
				}
			})
		}
	}
}

// TestEndInsideFrame: a client that resets the connection, or ends its stream, in the
// middle of a frame netio is reading itself (small and reserved) is closed and leaves
// nothing charged.
func TestEndInsideFrame(t *testing.T) {
	s := startTestServer(t, Config{MaxFrame: 16 << 20, MaxInboundTotal: 64 << 20})
	for _, size := range []int{5000, 200 << 10, 3 << 20} {
		for _, reset := range []bool{false, true} {
			first, _ := produceFrame(0, gnetReadCap, 0)
			big, _ := produceFrame(1, size, 0)
			c, err := net.Dial("tcp", s.Addr())
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(time.Minute))
			st := s.Stats()
			read := st.BytesReceived + st.BytesHeld
			if _, err := c.Write(append(append([]byte(nil), first...), big[:size/2]...)); err != nil {
				t.Fatal(err)
			}
			expectAnswer(t, bufio.NewReader(c), 0, wire.CodeNone)
			waitFor(t, "half the frame read", func() bool {
				st := s.Stats()
				return st.BytesReceived+st.BytesHeld >= read+uint64(size/2)
			})
			before := s.Stats().BytesReceived
			if reset {
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
			} else {
				c.(*net.TCPConn).CloseWrite()
			}
			st = settled(t, s)
			if st.InboundBuffered != 0 || st.FramesTimedOut != 0 {
				t.Fatalf("size %d reset %v: %+v", size, reset, st)
			}
			if st.BytesReceived != before {
				t.Fatalf("size %d reset %v: read %d bytes after the end", size, reset, st.BytesReceived-before)
			}
			c.Close()
		}
	}
}

// TestFrameTimerAfterDirectRead: a frame netio read part of itself and that then stalls is
// answered with timeout; one that keeps coming, more than 1 KiB at a time, is not.
func TestFrameTimerAfterDirectRead(t *testing.T) {
	s := startTestServer(t, Config{MaxFrame: 16 << 20, FrameTimeout: 300 * time.Millisecond})
	first, _ := produceFrame(0, gnetReadCap, 0)
	slow, crc := produceFrame(1, 40<<10, 0)

	// Progressing: 4 KiB every 100 ms, a second in all, over three times FrameTimeout.
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(time.Minute))
	r := bufio.NewReader(c)
	if _, err := c.Write(append(append([]byte(nil), first...), slow[:2000]...)); err != nil {
		t.Fatal(err)
	}
	expectAnswer(t, r, 0, wire.CodeNone)
	for pos := 2000; pos < len(slow); pos += 4 << 10 {
		time.Sleep(100 * time.Millisecond)
		if _, err := c.Write(slow[pos:min(pos+4<<10, len(slow))]); err != nil {
			t.Fatal(err)
		}
	}
	if resp := expectAnswer(t, r, 1, wire.CodeNone); uint32(resp.Body.(*wire.ProduceResponse).BaseOffset) != crc {
		t.Fatal("wrong batches")
	}
	c.Close()

	// Stalled after netio's own read.
	c, err = net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	r = bufio.NewReader(c)
	if _, err := c.Write(append(append([]byte(nil), first...), slow[:2000]...)); err != nil {
		t.Fatal(err)
	}
	expectAnswer(t, r, 0, wire.CodeNone)
	start := time.Now()
	expectAnswer(t, r, 1, wire.CodeTimeout)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("timed out after %v", d)
	}
	c.Close()
	if st := settled(t, s); st.FramesTimedOut != 1 || st.InboundBuffered != 0 {
		t.Fatalf("%+v", st)
	}
}

// TestManyConnectionsSmallBudget: connections pipelining frames around 1 KiB at once,
// against a budget far above what they send together, are all served.
func TestManyConnectionsSmallBudget(t *testing.T) {
	s := startTestServer(t, Config{MaxFrame: 1 << 20, MaxInboundTotal: 2 << 20, MaxInflight: 4})
	fixed := fixedProduce()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var stream []byte
			var crcs []uint32
			for j := range 40 {
				size := gnetReadCap - 30 + (i*40+j)%60
				f, crc := produceFrame(uint32(j), size, j*fixed)
				stream = append(stream, f...)
				crcs = append(crcs, crc)
			}
			c, err := net.Dial("tcp", s.Addr())
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(time.Minute))
			go c.Write(stream)
			r := bufio.NewReader(c)
			for j, want := range crcs {
				resp, err := readAnswer(r)
				if err != nil {
					errs <- fmt.Errorf("connection %d answer %d: %w", i, j, err)
					return
				}
				if resp.Header.Code != wire.CodeNone || resp.Header.RequestID != uint32(j) ||
					uint32(resp.Body.(*wire.ProduceResponse).BaseOffset) != want {
					errs <- fmt.Errorf("connection %d answer %d: request %d code %v %s", i, j,
						resp.Header.RequestID, resp.Header.Code, resp.Text)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := settled(t, s); st.InboundBuffered != 0 || st.RefusedBudget+st.RefusedConnLimit != 0 {
		t.Fatalf("%+v", st)
	}
}
