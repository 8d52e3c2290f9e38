package netio

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sluice/wire"
)

// mixedHandler answers request i inline on the loop when i%3 == 0 (unless offLoop) and
// from a new goroutine otherwise, with an answer of i%7 == 0 ? large : small bytes after its
// header (large is above directMax: the loop writes those). It counts the answers given
// and their Done calls.
type mixedHandler struct {
	large   int
	offLoop bool // every answer from a new goroutine
	// answered counts answers being made. A test holds one count of its own until it
	// has read the answers, so that Handle's Add never takes it up from zero: the race
	// detector would pair such an Add with the test's Wait as a race, the order between
	// them running through the socket, which it does not see.
	answered *sync.WaitGroup
	given    *atomic.Int64
	done     *atomic.Int64
}

func (mixedHandler) Serving(string) {}

func (h mixedHandler) Handle(c *Conn, sl Slot, req *wire.Request) {
	id := req.Header.RequestID
	h.answered.Add(1)
	answer := func() {
		defer h.answered.Done()
		frame, headLen := h.frame(id)
		h.given.Add(1)
		c.Respond(sl, Response{Head: frame[:headLen], Iov: [][]byte{frame[headLen:]}, File: -1,
			Done: DoneFunc(func() { h.done.Add(1) })})
	}
	if id%3 == 0 && !h.offLoop {
		answer()
		return
	}
	go answer()
}

// frame returns the answer to request id, and how long its header is.
func (h mixedHandler) frame(id uint32) ([]byte, int) {
	n := 16
	if id%7 == 0 {
		n = h.large
	}
	r := wire.Response{Header: wire.ResponseHeader{RequestID: id, APIKey: wire.APIProduce},
		Body: &wire.ProduceResponse{BaseOffset: int64(n), LastOffset: int64(n)}}
	head := r.AppendTo(nil)
	frame := append(head, bytes.Repeat([]byte{byte(id)}, n)...)
	wire.FinishFrame(frame, 0)
	return frame, len(head)
}

// readFrame reads one length-prefixed frame whole.
func readFrame(r io.Reader) ([]byte, error) {
	var lenBuf [4]byte
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return nil, err
	}
	frame := make([]byte, 4+binary.LittleEndian.Uint32(lenBuf[:]))
	copy(frame, lenBuf[:])
	_, err := io.ReadFull(r, frame[4:])
	return frame, err
}

// produceStream returns n empty produce requests, ids 0 to n-1, back to back.
func produceStream(n int) []byte {
	var b []byte
	for id := range uint32(n) {
		req := wire.Request{Header: wire.RequestHeader{APIKey: wire.APIProduce, RequestID: id},
			Body: &wire.ProduceRequest{Topic: []byte("t"), Version: 1}}
		b = req.AppendTo(b)
	}
	return b
}

// dialStream connects to s and sends it n empty produce requests (produceStream) from
// another goroutine, so that the caller may read, or not; the test's end closes it.
func dialStream(t *testing.T, s *Server, n int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go c.Write(produceStream(n))
	return c
}

// readAnswers reads n answers from c, within a minute, and checks that each is whole,
// in order, and the one h gives.
func (h mixedHandler) readAnswers(t *testing.T, c net.Conn, n int) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(time.Minute))
	r := bufio.NewReader(c)
	for id := range uint32(n) {
		got, err := readFrame(r)
		if err != nil {
			t.Fatalf("answer %d: %v", id, err)
		}
		if want, _ := h.frame(id); !bytes.Equal(got, want) {
			t.Fatalf("answer %d: %d bytes, not the %d bytes of its answer", id, len(got), len(want))
		}
	}
}

// TestDirectWrites: answers written by whoever makes them (the loop inline, other
// goroutines, the loop again for large ones) go out whole and in request order on a
// connection that pauses at MaxInflight again and again (a writer off the loop must
// wake the loop to take the requests it held), and each answer's Done runs once.
func TestDirectWrites(t *testing.T) {
	var answered sync.WaitGroup
	answered.Add(1) // held until the answers are read (mixedHandler.answered)
	var given, done atomic.Int64
	h := mixedHandler{large: directMax + 1000, answered: &answered, given: &given, done: &done}
	s := startServer(t, Config{MaxInflight: 4}, h)
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	go c.Write(produceStream(n))
	h.readAnswers(t, c, n)
	c.Close()
	answered.Done()
	answered.Wait()
	st := settled(t, s)
	if st.DirectWrites == 0 || st.LoopWrites == 0 {
		t.Fatalf("answers written by their makers %d, by the loop %d: want some of each (every seventh is over directMax)",
			st.DirectWrites, st.LoopWrites)
	}
	if st.DirectWrites+st.LoopWrites != n {
		t.Fatalf("answers counted written: %d + %d, want %d", st.DirectWrites, st.LoopWrites, n)
	}
	if st.PausedInflight == 0 {
		t.Fatal("the connection never paused: the test did not test resuming")
	}
	if given.Load() != n || done.Load() != n {
		t.Fatalf("%d answers given, %d Done calls; want %d each", given.Load(), done.Load(), n)
	}
	if st.OutboundQueued != 0 || st.OutboundReserved != 0 {
		t.Fatalf("outbound budget still charged: %d queued, %d reserved", st.OutboundQueued, st.OutboundReserved)
	}
	t.Logf("%d answers written off the loop's own turn, %d pauses", st.DirectWrites, st.PausedInflight)
}

// TestStalledReaderDuringDirectWrites: a client that stops reading while answers are
// written by the goroutines that make them fills its socket; the writer that finds it
// full waits for writability as the loop would, without holding anything the loop
// needs: another client of the same loop is served meanwhile. When the first client
// reads again, every answer arrives whole and in order, each Done runs once, and the
// budgets settle.
func TestStalledReaderDuringDirectWrites(t *testing.T) {
	var answered sync.WaitGroup
	answered.Add(1) // held until the answers are read (mixedHandler.answered)
	var given, done atomic.Int64
	// Every answer is made off the loop and may be written directly: large ones (every
	// seventh) are 200 KiB, under directMax, so that some 40 of them fill any loopback
	// socket's buffers. The loop takes every request at once (MaxInflight), so that once
	// the socket is full only the answers' makers write: one that found it full and did
	// not wait for writability would leave the rest stranded.
	h := mixedHandler{large: 200 << 10, offLoop: true, answered: &answered, given: &given, done: &done}
	s := startServer(t, Config{MaxInflight: 512}, h)
	const n = 300
	stalled := dialStream(t, s, n)
	waitFor(t, "a writer to find the socket full", func() bool { return s.Stats().WriteWaits > 0 })
	if st := s.Stats(); st.DirectWrites == 0 {
		t.Fatal("no answer was written by its maker before the socket filled")
	}
	other, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Write(produceStream(50)); err != nil {
		t.Fatal(err)
	}
	h.readAnswers(t, other, 50) // while the first client still reads nothing
	h.readAnswers(t, stalled, n)
	stalled.Close()
	other.Close()
	answered.Done()
	answered.Wait()
	st := settled(t, s)
	if given.Load() != n+50 || done.Load() != n+50 {
		t.Fatalf("%d answers given, %d Done calls; want %d each", given.Load(), done.Load(), n+50)
	}
	if st.DirectWrites+st.LoopWrites != n+50 {
		t.Fatalf("answers counted written: %d + %d, want %d", st.DirectWrites, st.LoopWrites, n+50)
	}
	if st.OutboundQueued != 0 || st.OutboundReserved != 0 {
		t.Fatalf("outbound budget still charged: %d queued, %d reserved", st.OutboundQueued, st.OutboundReserved)
	}
	t.Logf("%d writability waits, %d answers written by their makers, %d by the loop", st.WriteWaits,
		st.DirectWrites, st.LoopWrites)
}

// TestCloseDuringDirectWrites: a client that closes its connection while answers are
// being written from other goroutines loses them, and nothing else: each answer's Done
// runs exactly once (written, or dropped with the connection), and the budgets settle.
func TestCloseDuringDirectWrites(t *testing.T) {
	var answered sync.WaitGroup
	answered.Add(1) // held until the answers are read (mixedHandler.answered)
	var given, done atomic.Int64
	h := mixedHandler{large: directMax + 1000, answered: &answered, given: &given, done: &done}
	s := startServer(t, Config{MaxInflight: 64}, h)
	for round := range 20 {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(produceStream(200)); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(time.Minute))
		r := bufio.NewReader(c)
		for id := range uint32(round * 3) { // read a few, then go away
			if _, err := readFrame(r); err != nil {
				t.Fatalf("round %d, answer %d: %v", round, id, err)
			}
		}
		c.Close()
	}
	st := settled(t, s)
	answered.Done()
	answered.Wait()
	if given.Load() == 0 || done.Load() != given.Load() {
		t.Fatalf("%d answers given, %d Done calls", given.Load(), done.Load())
	}
	if st.OutboundQueued != 0 || st.OutboundReserved != 0 {
		t.Fatalf("outbound budget still charged: %d queued, %d reserved", st.OutboundQueued, st.OutboundReserved)
	}
}

// panicHandler answers on the loop; the answer to request 0 has a Done that panics (a
// double release, say: a bug that the handler's recovery reports). It keeps the last
// connection it served.
type panicHandler struct{ conn chan *Conn }

func (panicHandler) Serving(string) {}

func (h panicHandler) Handle(c *Conn, sl Slot, req *wire.Request) {
	select {
	case h.conn <- c:
	default:
	}
	r := wire.Response{Header: wire.ResponseHeader{RequestID: req.Header.RequestID, APIKey: req.Header.APIKey},
		Body: &wire.ProduceResponse{}}
	resp := Response{Head: r.AppendTo(nil), File: -1}
	if req.Header.RequestID == 0 {
		resp.Done = DoneFunc(func() { panic("test: a Done that panics") })
	}
	c.Respond(sl, resp)
}

// TestDonePanicLeavesTheWriterFree: a Done that panics while its answer is written by
// the goroutine that gave it (here the loop, in Handle) is recovered as a panic in the
// handler, and the connection goes on answering: the writer's lock was not left held,
// which would stop the loop at its next flush. RemoteAddr still answers once the
// connection is gone (gnet's address is cleared at close; netio keeps its own).
func TestDonePanicLeavesTheWriterFree(t *testing.T) {
	h := panicHandler{conn: make(chan *Conn, 1)}
	s := startServer(t, Config{}, h)
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(c)
	for id := range uint32(3) {
		req := wire.Request{Header: wire.RequestHeader{APIKey: wire.APIProduce, RequestID: id},
			Body: &wire.ProduceRequest{Topic: []byte("t"), Version: 1}}
		if _, err := c.Write(req.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
		resp, err := readAnswer(r)
		if err != nil {
			t.Fatalf("answer %d: %v", id, err)
		}
		if resp.Header.RequestID != id || resp.Header.Code != wire.CodeNone {
			t.Fatalf("answer %d: request %d, code %v", id, resp.Header.RequestID, resp.Header.Code)
		}
	}
	local := c.LocalAddr().String()
	c.Close()
	st := settled(t, s)
	if st.Panics != 1 {
		t.Fatalf("%d panics counted, want 1", st.Panics)
	}
	if got := (<-h.conn).RemoteAddr(); got != local {
		t.Fatalf("RemoteAddr after close: %q, want %q", got, local)
	}
}

// connsHandler answers every request on the loop, empty, and hands over each connection
// the first time it serves it.
type connsHandler struct{ conns chan *Conn }

func (connsHandler) Serving(string) {}

func (h connsHandler) Handle(c *Conn, sl Slot, req *wire.Request) {
	if req.Header.RequestID == 0 {
		h.conns <- c
	}
	r := wire.Response{Header: wire.ResponseHeader{RequestID: req.Header.RequestID, APIKey: req.Header.APIKey},
		Body: &wire.ProduceResponse{}}
	c.Respond(sl, Response{Head: r.AppendTo(nil), File: -1})
}

// TestLoopNeverWaitsForAWriter: while a writer holds one connection's writer lock (the
// test takes it itself, standing for a shard goroutine preempted in the middle of a write:
// a fault the real parts cannot be made to show on cue), the loop goes on serving its
// other connections, and the answer queued meanwhile goes out when the holder is done.
func TestLoopNeverWaitsForAWriter(t *testing.T) {
	h := connsHandler{conns: make(chan *Conn, 2)}
	s := startServer(t, Config{}, h) // one loop: both connections on it
	dial := func() (net.Conn, *bufio.Reader) {
		nc, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		nc.SetReadDeadline(time.Now().Add(30 * time.Second))
		return nc, bufio.NewReader(nc)
	}
	ask := func(nc net.Conn, id uint32) {
		req := wire.Request{Header: wire.RequestHeader{APIKey: wire.APIProduce, RequestID: id},
			Body: &wire.ProduceRequest{Topic: []byte("t"), Version: 1}}
		if _, err := nc.Write(req.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(r *bufio.Reader, id uint32) {
		t.Helper()
		resp, err := readAnswer(r)
		if err != nil || resp.Header.RequestID != id {
			t.Fatalf("answer %d: %v %+v", id, err, resp)
		}
	}
	a, ra := dial()
	ask(a, 0)
	expect(ra, 0)
	ca := <-h.conns
	b, rb := dial()
	ask(b, 0)
	expect(rb, 0)

	ca.wmu.Lock() // a writer holds a
	ask(a, 1)     // answered on the loop, into a's queue: the holder is asked to look again
	for id := uint32(1); id <= 3; id++ {
		ask(b, id) // the loop serves b meanwhile
		expect(rb, id)
	}
	if !ca.flushWanted.Load() {
		t.Fatal("the answer to a was not left to the writer holding a")
	}
	// The holder finishes as flushOrLeave does: it lets go, then looks again.
	ca.wmu.Unlock()
	ca.send()
	expect(ra, 1)
}

// lateWriterHandler holds request 0's slot; request 1's handler answers request 0 on the
// loop with a Done that waits until another goroutine has answered request 1 (which then
// finds the writer's lock held and asks the holder to look again), and then panics.
type lateWriterHandler struct {
	slot0             chan Slot
	inDone, answered1 chan struct{}
}

func (lateWriterHandler) Serving(string) {}

func (h lateWriterHandler) Handle(c *Conn, sl Slot, req *wire.Request) {
	if req.Header.RequestID == 0 {
		h.slot0 <- sl
		return
	}
	go func() {
		<-h.inDone
		c.Respond(sl, emptyAnswer(1))
		close(h.answered1)
	}()
	resp := emptyAnswer(0)
	resp.Done = DoneFunc(func() {
		close(h.inDone)
		<-h.answered1
		panic("test: a Done that panics while another answer waits for the writer")
	})
	c.Respond(<-h.slot0, resp)
}

// TestDonePanicLeavesNoAnswerBehind: the answer given while a panicking Done held the
// writer (its giver found the lock held and left it to the holder's second look, which
// the panic skipped) still goes out: the loop is woken to look instead.
func TestDonePanicLeavesNoAnswerBehind(t *testing.T) {
	h := lateWriterHandler{slot0: make(chan Slot, 1), inDone: make(chan struct{}), answered1: make(chan struct{})}
	s := startServer(t, Config{}, h)
	askN(t, s, 2)
	if n := s.Stats().Panics; n != 1 {
		t.Fatalf("%d panics counted, want 1", n)
	}
}

// secondLookHandler holds request 0's slot; request 1's handler answers request 0 on
// the loop, and arms the flush hook to have another goroutine answer request 1 while
// that flush still holds the writer, after its last look at the queue.
type secondLookHandler struct {
	slot0 chan Slot
	late  chan func() // the answer to give from the hook, once
}

func (secondLookHandler) Serving(string) {}

func (h secondLookHandler) Handle(c *Conn, sl Slot, req *wire.Request) {
	if req.Header.RequestID == 0 {
		h.slot0 <- sl
		return
	}
	h.late <- func() { c.Respond(sl, emptyAnswer(1)) }
	c.Respond(<-h.slot0, emptyAnswer(0))
}

// TestHolderLooksAgain: an answer given while another writer holds the connection,
// after that writer's last look at the queue (its giver finds the lock held and leaves
// it to the holder), goes out: the holder looks again before it lets go, and nothing else
// would write it (no wake is pending, no event comes).
func TestHolderLooksAgain(t *testing.T) {
	h := secondLookHandler{slot0: make(chan Slot, 1), late: make(chan func(), 1)}
	cfg := Config{afterFlush: func() {
		select {
		case give := <-h.late:
			done := make(chan struct{})
			go func() { give(); close(done) }() // another goroutine: its try of the lock fails
			<-done
		default:
		}
	}}
	askN(t, startServer(t, cfg, h), 2)
}

// emptyAnswer is an empty produce answer to request id.
func emptyAnswer(id uint32) Response {
	r := wire.Response{Header: wire.ResponseHeader{RequestID: id, APIKey: wire.APIProduce},
		Body: &wire.ProduceResponse{}}
	return Response{Head: r.AppendTo(nil), File: -1}
}

// askN sends requests 0 to n-1 in one write on a new connection and expects them all
// answered, in order, without error, within 20 s.
func askN(t *testing.T, s *Server, n int) {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(produceStream(n)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(c)
	for id := range uint32(n) {
		resp, err := readAnswer(r)
		if err != nil || resp.Header.RequestID != id || resp.Header.Code != wire.CodeNone {
			t.Fatalf("answer %d: %v %+v", id, err, resp)
		}
	}
}
