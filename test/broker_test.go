package test

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"sluice/internal/testbroker"
	"sluice/wire"
)

// TestBrokerRoundTrip produces through the write window and fetches from memory, then
// restarts the broker and fetches again from the segment files (the sendfile path).
func TestBrokerRoundTrip(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	w := dial(t, b.Addr)
	createTopic(t, w, "orders", 3)
	md := w.call(&wire.MetadataRequest{Topics: []string{"orders", "missing"}})
	mustOK(t, md)
	if topics := md.Body.(*wire.MetadataResponse).Topics; len(topics) != 1 || len(topics[0].Partitions) != 3 || topics[0].Partitions[1].Lo != 21845 {
		t.Fatalf("metadata: %+v", topics)
	}
	// First request with S = 0 learns S; then (V, S) must match.
	resp := w.call(&wire.ProduceRequest{Topic: []byte("orders"), Partition: 1, Version: 1, Batches: records(7, 0, "a", 5)})
	mustOK(t, resp)
	pr := resp.Body.(*wire.ProduceResponse)
	if pr.BaseOffset != 0 || pr.LastOffset != 4 || pr.Session == 0 {
		t.Fatalf("produce: %+v", pr)
	}
	s := pr.Session
	resp = w.call(&wire.ProduceRequest{Topic: []byte("orders"), Partition: 1, Version: 1, Session: s, WaitDurableMs: 5000, Batches: records(7, 5, "b", 3)})
	mustOK(t, resp)
	if pr := resp.Body.(*wire.ProduceResponse); pr.BaseOffset != 5 || pr.Checkpoint < 7 {
		t.Fatalf("produce waiting for durability: %+v", pr)
	}
	// A resend of the same batch is acknowledged with its first offsets, not appended.
	resp = w.call(&wire.ProduceRequest{Topic: []byte("orders"), Partition: 1, Version: 1, Session: s, Batches: records(7, 5, "b", 3)})
	mustOK(t, resp)
	if pr := resp.Body.(*wire.ProduceResponse); pr.BaseOffset != 5 || pr.LastOffset != 7 {
		t.Fatalf("resend: %+v", pr)
	}
	want := "[a-0 a-1 a-2 a-3 a-4 b-0 b-1 b-2]"
	if got := fetchValues(t, w, "orders", 1, 0); fmt.Sprint(got) != want {
		t.Fatalf("fetch: %v", got)
	}
	if got := fetchValues(t, w, "orders", 1, 6); fmt.Sprint(got) != "[b-1 b-2]" {
		t.Fatalf("fetch from 6: %v", got)
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	b.Restart()
	w = dial(t, b.Addr)
	if got := fetchValues(t, w, "orders", 1, 0); fmt.Sprint(got) != want {
		t.Fatalf("fetch after restart: %v", got)
	}
	// The old session is refused with the new window.
	resp = w.call(&wire.ProduceRequest{Topic: []byte("orders"), Partition: 1, Version: 1, Session: s, Batches: records(7, 8, "c", 1)})
	if resp.Header.Code != wire.CodeSessionMismatch {
		t.Fatalf("old session: %v", resp.Header.Code)
	}
	if pr := resp.Body.(*wire.ProduceResponse); pr.Session == s || pr.Checkpoint != 7 {
		t.Fatalf("session mismatch answer: %+v", pr)
	}
}

// TestLongPoll parks a fetch at the end until a produce arrives.
func TestLongPoll(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	w := dial(t, b.Addr)
	createTopic(t, w, "lp", 1)
	id := w.send(&wire.FetchRequest{Topic: []byte("lp"), Offset: 0, MaxBytes: 1 << 20, MaxWaitMs: 20000})
	p := dial(t, b.Addr)
	mustOK(t, p.call(&wire.ProduceRequest{Topic: []byte("lp"), Version: 1, Batches: records(0, -1, "x", 2)}))
	resp := w.recv()
	mustOK(t, resp)
	if resp.Header.RequestID != id || len(resp.Body.(*wire.FetchResponse).Records) == 0 {
		t.Fatal("long poll answered without the records")
	}
	// With nothing arriving, the wait runs out and the answer is empty.
	start := time.Now()
	resp = w.call(&wire.FetchRequest{Topic: []byte("lp"), Offset: 2, MaxBytes: 1 << 20, MaxWaitMs: 50})
	mustOK(t, resp)
	if len(resp.Body.(*wire.FetchResponse).Records) != 0 || time.Since(start) < 40*time.Millisecond {
		t.Fatal("long poll did not wait, or returned records")
	}
}

// TestBadInput sends what no client should, each on its own connection, and checks the
// answer, that the connection closes where it must, and that a well-behaved client on
// another connection is unaffected throughout.
func TestBadInput(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	good := dial(t, b.Addr)
	createTopic(t, good, "t", 1)
	produce := func(v uint32, s uint64, topic string, part uint32, batches []byte) *wire.Response {
		return good.call(&wire.ProduceRequest{Topic: []byte(topic), Partition: part, Version: v, Session: s, Batches: batches})
	}
	mustOK(t, produce(1, 0, "t", 0, records(0, -1, "ok", 1)))
	for _, c := range []struct {
		name string
		resp *wire.Response
		want wire.Code
	}{
		{"wrong V", produce(9, 0, "t", 0, records(0, -1, "x", 1)), wire.CodeVersionMismatch},
		{"wrong S", produce(1, 12345, "t", 0, records(0, -1, "x", 1)), wire.CodeSessionMismatch},
		{"unknown topic", produce(1, 0, "nope", 0, records(0, -1, "x", 1)), wire.CodeUnknownTopic},
		{"unknown partition", produce(1, 0, "t", 5, records(0, -1, "x", 1)), wire.CodeUnknownPartition},
		{"corrupt batch", produce(1, 0, "t", 0, corrupt(records(0, -1, "x", 3))), wire.CodeCorruptBatch},
		{"garbage batch", produce(1, 0, "t", 0, []byte(strings.Repeat("z", 80))), wire.CodeCorruptBatch},
		{"fetch out of range", good.call(&wire.FetchRequest{Topic: []byte("t"), Offset: 99, MaxBytes: 100}), wire.CodeOffsetOutOfRange},
		{"describe unknown topic", good.call(&wire.DescribeTopicRequest{Name: "nope"}), wire.CodeUnknownTopic},
		{"create bad name", good.call(&wire.CreateTopicRequest{Name: "a/b", Partitions: 1}), wire.CodeInvalidTopic},
		{"create zero partitions", good.call(&wire.CreateTopicRequest{Name: "zero", Partitions: 0}), wire.CodeInvalidConfig},
		{"create existing differently", good.call(&wire.CreateTopicRequest{Name: "t", Partitions: 7}), wire.CodeTopicExists},
	} {
		if c.resp.Header.Code != c.want {
			t.Errorf("%s: code %v (%s), want %v", c.name, c.resp.Header.Code, c.resp.Text, c.want)
		}
	}
	fatal := func(name string, raw []byte, want wire.Code) {
		t.Helper()
		w := dial(t, b.Addr)
		w.conn.Write(raw)
		frame, err := w.readFrame()
		if err != nil {
			t.Fatalf("%s: no error frame: %v", name, err)
		}
		var resp wire.Response
		if _, err := resp.Decode(frame, wire.DefaultMaxFrame); err != nil || resp.Header.Code != want {
			t.Fatalf("%s: answer %v (%v), want %v", name, resp.Header.Code, err, want)
		}
		if _, err := w.readFrame(); err != io.EOF {
			t.Fatalf("%s: connection not closed after the error: %v", name, err)
		}
	}
	fatal("garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), wire.CodeFrameTooLarge)
	fatal("huge frame", binary.LittleEndian.AppendUint32(nil, 1<<31), wire.CodeFrameTooLarge)
	fatal("unknown api", frame(99, 0, nil), wire.CodeUnknownAPI)
	fatal("bad version", frame(uint16(wire.APIProduce), 77, nil), wire.CodeUnsupportedVersion)
	fatal("truncated body", frame(uint16(wire.APIFetch), 0, []byte{1, 2, 3}), wire.CodeMalformed)

	// A client that sends a length and stops, and one that disconnects mid-frame.
	stalled, _ := net.Dial("tcp", b.Addr)
	defer stalled.Close()
	stalled.Write(binary.LittleEndian.AppendUint32(nil, 1000))
	half, _ := net.Dial("tcp", b.Addr)
	half.Write(frame(uint16(wire.APIFetch), 0, make([]byte, 40))[:20])
	half.Close()
	mustOK(t, produce(1, 0, "t", 0, records(0, -1, "still", 1)))
	if got := fetchValues(t, good, "t", 0, 0); fmt.Sprint(got) != "[ok-0 still-0]" {
		t.Fatalf("after bad input the partition holds %v", got)
	}
}

// frame builds a request frame with any API key, version and body bytes.
func frame(api, version uint16, body []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(8+len(body)))
	b = binary.LittleEndian.AppendUint16(b, api)
	b = binary.LittleEndian.AppendUint16(b, version)
	b = binary.LittleEndian.AppendUint32(b, 1)
	return append(b, body...)
}

func corrupt(b []byte) []byte {
	b[len(b)-2] ^= 0xff
	return b
}

// TestLongPollDoesNotHoldUpOthers: answers on a connection keep request order, so a
// long poll on a quiet partition must not delay the answer for a busy one pipelined
// behind it: the broker answers the parked poll early.
func TestLongPollDoesNotHoldUpOthers(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	w := dial(t, b.Addr)
	createTopic(t, w, "hol", 2)
	mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("hol"), Partition: 1, Version: 1, Batches: records(0, -1, "x", 1)}))
	start := time.Now()
	quiet := w.send(&wire.FetchRequest{Topic: []byte("hol"), Partition: 0, Offset: 0, MaxBytes: 1 << 20, MaxWaitMs: 30000})
	busy := w.send(&wire.FetchRequest{Topic: []byte("hol"), Partition: 1, Offset: 0, MaxBytes: 1 << 20, MaxWaitMs: 30000})
	r1, r2 := w.recv(), w.recv()
	if r1.Header.RequestID != quiet || r2.Header.RequestID != busy {
		t.Fatal("answers out of order")
	}
	if len(r1.Body.(*wire.FetchResponse).Records) != 0 || len(r2.Body.(*wire.FetchResponse).Records) == 0 {
		t.Fatal("wrong records")
	}
	// Not a timing goal: 30 s is the poll's max wait, and the early answer is the point.
	if time.Since(start) > 20*time.Second {
		t.Fatal("the busy partition's answer waited for the quiet partition's long poll")
	}
}
