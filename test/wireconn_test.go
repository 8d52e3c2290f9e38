package test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"sluice/batch"
	"sluice/wire"
)

// wireConn is a minimal raw protocol client for broker tests: it writes request frames
// and reads response frames, so tests can also send bytes no real client would.
type wireConn struct {
	t    testing.TB
	conn net.Conn
	r    *bufio.Reader
	id   uint32
}

func dial(t testing.TB, addr string) *wireConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &wireConn{t: t, conn: c, r: bufio.NewReaderSize(c, 1<<20)}
}

// send writes one request and returns its id.
func (w *wireConn) send(body wire.Body) uint32 {
	w.t.Helper()
	w.id++
	min, _, _ := body.Key().Versions()
	req := wire.Request{Header: wire.RequestHeader{APIKey: body.Key(), APIVersion: min, RequestID: w.id}, Body: body}
	if _, err := w.conn.Write(req.AppendTo(nil)); err != nil {
		w.t.Fatalf("write: %v", err)
	}
	return w.id
}

// recv reads one response frame.
func (w *wireConn) recv() *wire.Response {
	w.t.Helper()
	frame, err := w.readFrame()
	if err != nil {
		w.t.Fatalf("read response: %v", err)
	}
	var resp wire.Response
	if _, err := resp.Decode(frame, wire.DefaultMaxFrame); err != nil {
		w.t.Fatalf("decode response: %v", err)
	}
	return &resp
}

func (w *wireConn) readFrame() ([]byte, error) {
	w.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	var lenBuf [4]byte
	if _, err := io.ReadFull(w.r, lenBuf[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(lenBuf[:])
	frame := make([]byte, 4+n)
	copy(frame, lenBuf[:])
	if _, err := io.ReadFull(w.r, frame[4:]); err != nil {
		return nil, err
	}
	return frame, nil
}

// call sends a request and returns its response, checking the id.
func (w *wireConn) call(body wire.Body) *wire.Response {
	w.t.Helper()
	id := w.send(body)
	resp := w.recv()
	if resp.Header.RequestID != id {
		w.t.Fatalf("response to %d, want %d", resp.Header.RequestID, id)
	}
	return resp
}

// mustOK fails the test unless resp succeeded.
func mustOK(t testing.TB, resp *wire.Response) {
	t.Helper()
	if resp.Header.Code != wire.CodeNone {
		t.Fatalf("%v failed: %v %s", resp.Header.APIKey, resp.Header.Code, resp.Text)
	}
}

func createTopic(t testing.TB, w *wireConn, name string, parts int) {
	t.Helper()
	mustOK(t, w.call(&wire.CreateTopicRequest{Name: name, Partitions: uint32(parts)}))
}

// records builds a batch with values prefix-0 ... prefix-(n-1).
func records(pid int64, seq int32, prefix string, n int) []byte {
	var b batch.Builder
	b.Reset(nil, pid, seq)
	for i := range n {
		b.Add(uint16(i), time.Now().UnixMilli(), nil, fmt.Appendf(nil, "%s-%d", prefix, i))
	}
	return b.Finish()
}

// fetchValues reads a partition from offset to its end and returns the record values
// from offset on.
func fetchValues(t testing.TB, w *wireConn, topic string, part uint32, from int64) []string {
	t.Helper()
	vals, failed := tryFetchValues(t, w, topic, part, from)
	if failed != nil {
		mustOK(t, failed)
	}
	return vals
}

// tryFetchValues is fetchValues that returns, instead of failing the test, the first
// fetch the broker refused (an offset retention deleted meanwhile, say).
func tryFetchValues(t testing.TB, w *wireConn, topic string, part uint32, from int64) ([]string, *wire.Response) {
	t.Helper()
	var vals []string
	for off := from; ; {
		resp := w.call(&wire.FetchRequest{Topic: []byte(topic), Partition: part, Offset: off, MaxBytes: 1 << 20})
		if resp.Header.Code != wire.CodeNone {
			return vals, resp
		}
		fr := resp.Body.(*wire.FetchResponse)
		if len(fr.Records) == 0 {
			if off != fr.HighWatermark {
				t.Fatalf("empty fetch at %d below the high watermark %d", off, fr.HighWatermark)
			}
			return vals, nil
		}
		for rest := fr.Records; len(rest) > 0; {
			var it batch.Iter
			if err := it.Reset(rest); err != nil {
				t.Fatalf("fetch at %d: %v", off, err)
			}
			h := it.Header()
			for it.Next() {
				if r := it.Record(); r.Offset >= off {
					vals = append(vals, string(r.Value))
				}
			}
			off = h.LastOffset() + 1
			rest = rest[h.Size():]
		}
	}
}

// lastOffset returns the last offset of the whole batches in records.
func lastOffset(t testing.TB, records []byte) int64 {
	t.Helper()
	last := int64(-1)
	for len(records) > 0 {
		h, err := batch.Check(records)
		if err != nil {
			t.Fatal(err)
		}
		last, records = h.LastOffset(), records[h.Size():]
	}
	return last
}

// readFrameInto reads one response frame into buf (grown if needed).
func (w *wireConn) readFrameInto(buf []byte) ([]byte, error) {
	w.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(w.r, buf[:4]); err != nil {
		return nil, err
	}
	n := int(binary.LittleEndian.Uint32(buf)) + 4
	if n > len(buf) {
		buf = append(buf[:4], make([]byte, n-4)...)
	}
	if _, err := io.ReadFull(w.r, buf[4:n]); err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// callFetchMultiV sends a fetch_multi of the given version and decodes its answer in
// that version's layout.
func (w *wireConn) callFetchMultiV(body *wire.FetchMultiRequest, version uint16) *wire.Response {
	w.t.Helper()
	w.sendFetchMultiV(body, version)
	resp := w.recvFetchMultiV(version)
	if resp.Header.RequestID != w.id {
		w.t.Fatalf("response to %d, want %d", resp.Header.RequestID, w.id)
	}
	return resp
}

// sendFetchMultiV sends a fetch_multi of the given version.
func (w *wireConn) sendFetchMultiV(body *wire.FetchMultiRequest, version uint16) {
	w.t.Helper()
	w.id++
	req := wire.Request{Header: wire.RequestHeader{APIKey: wire.APIFetchMulti, APIVersion: version, RequestID: w.id}, Body: body}
	if _, err := w.conn.Write(req.AppendTo(nil)); err != nil {
		w.t.Fatalf("write: %v", err)
	}
}

// recvFetchMultiV reads a fetch_multi answer in the given version's layout.
func (w *wireConn) recvFetchMultiV(version uint16) *wire.Response {
	w.t.Helper()
	frame, err := w.readFrame()
	if err != nil {
		w.t.Fatalf("read response: %v", err)
	}
	resp := wire.Response{Body: &wire.FetchMultiResponse{Version: version}}
	if _, err := resp.Decode(frame, wire.DefaultMaxFrame); err != nil {
		w.t.Fatalf("decode response: %v", err)
	}
	return &resp
}
