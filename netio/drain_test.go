package netio

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"sluice/wire"
)

// readAnswer reads and decodes one response frame.
func readAnswer(r io.Reader) (*wire.Response, error) {
	var lenBuf [4]byte
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return nil, err
	}
	frame := make([]byte, 4+binary.LittleEndian.Uint32(lenBuf[:]))
	copy(frame, lenBuf[:])
	if _, err := io.ReadFull(r, frame[4:]); err != nil {
		return nil, err
	}
	var resp wire.Response
	if _, err := resp.Decode(frame, wire.DefaultMaxFrame); err != nil {
		return nil, err
	}
	return &resp, nil
}

// blockingHandler holds each request until release is closed, then answers it OK.
type blockingHandler struct {
	entered chan struct{}
	release chan struct{}
}

func (blockingHandler) Serving(string) {}

func (h blockingHandler) Handle(c *Conn, sl Slot, req *wire.Request) {
	h.entered <- struct{}{}
	<-h.release
	r := wire.Response{Header: wire.ResponseHeader{RequestID: req.Header.RequestID, APIKey: req.Header.APIKey},
		Body: &wire.ProduceResponse{}}
	c.Respond(sl, Response{Head: r.AppendTo(nil), File: -1})
}

// TestDrain: Drain returns only once the handler running has returned; a request read
// after it is answered not_serving without reaching the handler; the answer given while
// draining goes out on the open connection (Flushed) before Stop closes it.
func TestDrain(t *testing.T) {
	h := blockingHandler{entered: make(chan struct{}, 4), release: make(chan struct{})}
	s := startServer(t, Config{}, h)
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send := func(id uint32) {
		req := wire.Request{Header: wire.RequestHeader{APIKey: wire.APIProduce, RequestID: id},
			Body: &wire.ProduceRequest{Topic: []byte("t"), Version: 1}}
		if _, err := c.Write(req.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
	}
	send(1)
	<-h.entered
	drained := make(chan struct{})
	go func() { s.Drain(); close(drained) }()
	select {
	case <-drained:
		t.Fatal("Drain returned while a handler was running")
	case <-time.After(50 * time.Millisecond):
	}
	close(h.release)
	<-drained
	send(2) // read after the drain: answered at once, never handled
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Flushed(ctx); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for _, want := range []struct {
		id   uint32
		code wire.Code
	}{{1, wire.CodeNone}, {2, wire.CodeNotServing}} {
		resp, err := readAnswer(r)
		if err != nil {
			t.Fatalf("answer %d: %v", want.id, err)
		}
		if resp.Header.RequestID != want.id || resp.Header.Code != want.code {
			t.Fatalf("answer %d: request %d code %v %q, want code %v", want.id, resp.Header.RequestID, resp.Header.Code, resp.Text, want.code)
		}
	}
	select {
	case <-h.entered:
		t.Fatal("a request read after Drain reached the handler")
	default:
	}
}
