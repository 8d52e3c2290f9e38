package netio

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sluice/wire"
)

// partsHandler answers every request with one answer of several parts, some without a
// Head, some with empty buffers, some with a file region: the bytes of a frame whose
// header announces exactly their sum.
type partsHandler struct {
	file *os.File
	want chan []byte // the frame each answer should be, in order
}

func (partsHandler) Serving(string) {}

func (h partsHandler) Handle(c *Conn, sl Slot, req *wire.Request) {
	fileBytes := []byte("0123456789abcdef")
	parts := []Part{
		{Head: nil, Iov: [][]byte{nil, []byte("mem-one")}, File: -1},
		{Head: nil, File: int(h.file.Fd()), Pos: 2, Len: 10}, // a region only
		{Head: nil, File: int(h.file.Fd()), Pos: 5, Len: 3},  // and another, after a region
		{Head: nil, Iov: [][]byte{{}}, File: -1},             // nothing at all
		{Head: []byte("tail"), File: int(h.file.Fd()), Pos: 0, Len: 4},
	}
	body := []byte("mem-one")
	body = append(body, fileBytes[2:12]...)
	body = append(body, fileBytes[5:8]...)
	body = append(body, "tail"...)
	body = append(body, fileBytes[:4]...)
	hdr := wire.ResponseHeader{RequestID: req.Header.RequestID, APIKey: req.Header.APIKey}
	head := wire.AppendResponseHeader(nil, hdr, "")
	frame := append(bytes.Clone(head), body...)
	wire.FinishFrame(frame, 0)
	head = frame[:len(head):len(head)]
	h.want <- frame
	c.Respond(sl, Response{Head: head, File: -1, More: parts})
}

// TestPartsWithoutHead: an answer whose later parts have no Head (fetch_multi version 2
// sends every part header in the first), empty buffers, or only a file region goes out
// whole, byte for byte, and the next answer after it too (writev of empty buffers only
// ever wrote 0 bytes: a loop that never advanced).
func TestPartsWithoutHead(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "region"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("0123456789abcdef"); err != nil {
		t.Fatal(err)
	}
	h := partsHandler{file: f, want: make(chan []byte, 4)}
	s := startServer(t, Config{}, h)
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	for id := uint32(1); id <= 2; id++ {
		req := wire.Request{Header: wire.RequestHeader{APIKey: wire.APIProduce, RequestID: id},
			Body: &wire.ProduceRequest{Topic: []byte("t"), Version: 1}}
		if _, err := c.Write(req.AppendTo(nil)); err != nil {
			t.Fatal(err)
		}
		want := <-h.want
		got := make([]byte, len(want))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatalf("answer %d: %v", id, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("answer %d:\n%q\nwant\n%q", id, got, want)
		}
	}
	if n := s.Stats().DirectWrites; n != 0 {
		t.Fatalf("%d answers with file regions were written off the loop (send.go: never)", n)
	}
}
