package netio

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sluice/wire"
)

// dupHandler answers every request from another goroutine, with RespondCopy (heads on
// both sides of smallHead) or Respond, sometimes after a Park, and then answers it a
// second time from yet another goroutine after a random delay: by then the request's slot
// has usually been written and reused by a later request, whose answer the stale handle
// must not touch.
type dupHandler struct {
	staleDone *atomic.Int64
	staleGave *atomic.Int64
	wg        *sync.WaitGroup
}

func (dupHandler) Serving(string) {}

func dupText(id uint32) string {
	return fmt.Sprintf("ans-%d-%s", id, strings.Repeat("x", int(id%7)*25)) // 0 to 150 bytes of padding
}

func dupHead(id uint32, text string) []byte {
	r := wire.Response{Header: wire.ResponseHeader{RequestID: id, APIKey: wire.APIProduce, Code: wire.CodeBusy}, Text: text}
	return r.AppendTo(nil)
}

func (h dupHandler) Handle(c *Conn, sl Slot, req *wire.Request) {
	id := req.Header.RequestID
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		if id%5 == 0 {
			c.Park(sl, releaseFunc(func() {}))
			time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
		}
		head := dupHead(id, dupText(id))
		if id%2 == 0 {
			c.RespondCopy(sl, head)
			clear(head) // what was copied counts
		} else {
			c.Respond(sl, Response{Head: head, File: -1})
		}
		// The second answer, only once the first was given.
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
			stale := dupHead(id, "STALE")
			switch id % 3 {
			case 0:
				c.RespondCopy(sl, stale)
			case 1:
				h.staleGave.Add(1)
				c.Respond(sl, Response{Head: stale, File: -1, Done: DoneFunc(func() { h.staleDone.Add(1) })})
			default:
				c.Park(sl, releaseFunc(func() {}))
			}
		}()
	}()
}

// TestStaleHandlesUnderReuse: every answer must be its own request's, exactly once,
// in order, while second answers, copies and parks from stale handles race with the
// reuse of their slots by the requests after them; every dropped answer's Done runs once.
func TestStaleHandlesUnderReuse(t *testing.T) {
	h := dupHandler{staleDone: new(atomic.Int64), staleGave: new(atomic.Int64), wg: new(sync.WaitGroup)}
	// Held at one until the answers are read: Handle's Add never takes the count up from
	// zero, which the race detector would pair with the Wait below as a race (the order
	// between them runs through the socket, which it does not see).
	h.wg.Add(1)
	s := startServer(t, Config{MaxInflight: 8}, h)
	const n = 20000
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go c.Write(produceStream(n))
	c.SetReadDeadline(time.Now().Add(90 * time.Second))
	r := bufio.NewReader(c)
	for id := range uint32(n) {
		frame, err := readFrame(r)
		if err != nil {
			t.Fatalf("answer %d: %v", id, err)
		}
		var resp wire.Response
		if _, err := resp.Decode(frame, wire.DefaultMaxFrame); err != nil {
			t.Fatalf("answer %d: %v", id, err)
		}
		if resp.Header.RequestID != id || resp.Text != dupText(id) {
			t.Fatalf("answer %d: id %d text %q", id, resp.Header.RequestID, resp.Text)
		}
	}
	h.wg.Done()
	h.wg.Wait()
	if g, d := h.staleGave.Load(), h.staleDone.Load(); g != d {
		t.Fatalf("%d stale answers given, %d Done run", g, d)
	}
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var b [1]byte
	if k, _ := r.Read(b[:]); k > 0 {
		t.Fatal("bytes after the last answer: a stale handle answered")
	}
}
