package netio

import (
	"net"
	"strings"
	"testing"
	"time"

	"sluice/wire"
)

// TestStaleSlotAfterReuse: a written request's slot is reused for the next request read
// on its connection, and the handle of the old request must no longer answer, park or
// copy into it. Request 0 is answered and read; request 1 then gets the same slot (the
// test checks that it does: otherwise it would pass without testing anything). A second
// answer to request 0, from its stale handle, as a handler that answers twice would give,
// must be dropped with its Done run, and its RespondCopy and Park must do nothing; the
// client must read request 1's own answer, given after them.
func TestStaleSlotAfterReuse(t *testing.T) {
	s, h := startHoldingServer(t, Config{})
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stream := produceStream(2)
	first := len(stream) / 2 // two frames of one size
	if _, err := c.Write(stream[:first]); err != nil {
		t.Fatal(err)
	}
	r0 := nextRequest(t, h, 0)
	r0.answer()
	expectAnswer(t, c, 0, wire.CodeNone)
	if _, err := c.Write(stream[first:]); err != nil {
		t.Fatal(err)
	}
	r1 := nextRequest(t, h, 1)
	if r1.sl.s != r0.sl.s {
		t.Fatal("request 1 did not reuse request 0's slot: nothing here is stale")
	}

	done := make(chan struct{})
	stale := emptyAnswer(99)
	stale.Done = DoneFunc(func() { close(done) })
	r0.c.Respond(r0.sl, stale)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stale answer's Done did not run")
	}
	r0.c.RespondCopy(r0.sl, emptyAnswer(98).Head)
	r0.c.Park(r0.sl, releaseFunc(func() { t.Error("a stale park was released") }))

	r1.answer()
	expectAnswer(t, c, 1, wire.CodeNone)
	// Nothing else was written: a stale answer would have come before or after request 1's.
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var b [1]byte
	if n, _ := c.Read(b[:]); n > 0 {
		t.Fatal("bytes after request 1's answer: a stale handle answered")
	}
}

// TestRespondCopy: an answer given with RespondCopy goes out as given, whether its head
// fits in the slot (smallHead) or not, and the caller's buffer may change at once after
// the call: what is written is the copy. The answers are given last to first, so each
// waits in its slot, copied, until the ones before it are written.
func TestRespondCopy(t *testing.T) {
	s, h := startHoldingServer(t, Config{})
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 6
	if _, err := c.Write(produceStream(n)); err != nil {
		t.Fatal(err)
	}
	held := make([]heldRequest, n)
	for id := range uint32(n) {
		held[id] = nextRequest(t, h, id)
	}
	texts := make([]string, n)
	for i := n - 1; i >= 0; i-- {
		texts[i] = strings.Repeat(string(rune('a'+i)), i*40) // 0 to 200 bytes: both sides of smallHead
		r := wire.Response{Header: wire.ResponseHeader{RequestID: uint32(i), APIKey: wire.APIProduce, Code: wire.CodeBusy}, Text: texts[i]}
		head := r.AppendTo(nil)
		held[i].c.RespondCopy(held[i].sl, head)
		for j := range head {
			head[j] = 0xff // the copy is what counts
		}
	}
	for i := range n {
		resp := expectAnswer(t, c, uint32(i), wire.CodeBusy)
		if resp.Text != texts[i] {
			t.Fatalf("answer %d: text %q, want %q", i, resp.Text, texts[i])
		}
	}
	if len(texts[n-1]) <= smallHead || len(texts[1]) >= smallHead {
		t.Fatalf("texts of %d to %d bytes do not cover both sides of smallHead (%d)", len(texts[1]), len(texts[n-1]), smallHead)
	}
}
