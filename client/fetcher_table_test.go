package client

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"sluice/batch"
	"sluice/wire"
)

// testBatchAt returns a batch of count one-byte records at base.
func testBatchAt(base int64, count int) []byte {
	var b batch.Builder
	b.Reset(nil, 0, -1)
	for i := range count {
		b.Add(uint16(i), 1, nil, []byte("v"))
	}
	out := b.Finish()
	batch.SetBaseOffset(out, base)
	return out
}

// readFetchMulti reads one fetch_multi request from far: its header, its offsets by
// partition, and its partitions in request order.
func readFetchMulti(t *testing.T, far net.Conn) (wire.RequestHeader, map[uint32]int64, []uint32) {
	t.Helper()
	far.SetReadDeadline(time.Now().Add(5 * time.Second))
	var hdr [wire.RequestHeaderSize]byte
	if _, err := io.ReadFull(far, hdr[:]); err != nil {
		t.Fatalf("read request: %v", err)
	}
	size, h, err := wire.PeekFrame(hdr[:], wire.DefaultMaxFrame)
	if err != nil {
		t.Fatal(err)
	}
	frame := append(hdr[:], make([]byte, size-wire.RequestHeaderSize)...)
	if _, err := io.ReadFull(far, frame[wire.RequestHeaderSize:]); err != nil {
		t.Fatal(err)
	}
	var r wire.Request
	if _, err := r.Decode(frame, wire.DefaultMaxFrame); err != nil {
		t.Fatal(err)
	}
	m := map[uint32]int64{}
	var order []uint32
	for _, p := range r.Body.(*wire.FetchMultiRequest).Partitions {
		m[p.Partition] = p.Offset
		order = append(order, p.Partition)
	}
	return h, m, order
}

// TestFetcherEarlyFromTable: a lane of three partitions, the answer in the rotated request
// order with one part empty; the next request must leave after the table only (the far
// end of a net.Pipe, which plays the broker, sends nothing more until it has read it),
// with the table's offsets. A fake broker because only it can hold the records back.
func TestFetcherEarlyFromTable(t *testing.T) {
	c := &Consumer{cfg: defaultCfg(), topic: "t", topicB: []byte("t")}
	near, far := net.Pipe()
	defer near.Close()
	defer far.Close()
	ps := []*cpart{{id: 0}, {id: 1}, {id: 2}}
	f := &fetcher{c: c, addr: "x", parts: ps, pos: []int64{10, 20, 30}, nc: near, version: 2}

	type res struct {
		a   *answer
		err error
	}
	done := make(chan res, 1)
	go func() {
		a := &answer{f: f}
		err := f.fetch(a)
		done <- res{a, err}
	}()
	h, asked, order := readFetchMulti(t, far)
	if asked[0] != 10 || asked[1] != 20 || asked[2] != 30 {
		t.Fatalf("first request %v", asked)
	}
	recs := map[uint32][]byte{1: testBatchAt(20, 5), 0: testBatchAt(10, 3)}
	next := map[uint32]int64{0: 13, 1: 25, 2: 30}
	var parts []wire.FetchPart
	for _, id := range order {
		parts = append(parts, wire.FetchPart{Partition: id, HighWatermark: 100, Checkpoint: -1, NextOffset: next[id], Records: recs[id]})
	}
	resp := wire.Response{Header: wire.ResponseHeader{RequestID: h.RequestID, APIKey: wire.APIFetchMulti},
		Body: &wire.FetchMultiResponse{Parts: parts, Version: 2}}
	frame := resp.AppendTo(nil)
	table := wire.FetchMultiTableSize(3)
	go func() { far.Write(frame[:table]) }()
	// The next request must come before the records.
	_, asked2, _ := readFetchMulti(t, far)
	if asked2[0] != 13 || asked2[1] != 25 || asked2[2] != 30 {
		t.Fatalf("early request %v, want 0:13 1:25 2:30", asked2)
	}
	far.Write(frame[table:])
	r := <-done
	if r.err != nil || !f.early || len(r.a.parts) != 2 {
		t.Fatalf("err %v early %v parts %d", r.err, f.early, len(r.a.parts))
	}
	if f.pos[0] != 13 || f.pos[1] != 25 || f.pos[2] != 30 {
		t.Fatalf("pos %v", f.pos)
	}
	t.Logf("first answer ok; early request %v", asked2)
}

// TestFetcherNotEarly: an answer with an offset_out_of_range part is not early (the
// next request goes after take, from the clamped offset); a stale answer (its table's
// next offset is not where its records end) is handed over, and marks the fetcher stale
// so that it ends. A fake broker on a net.Pipe: a real one sends no stale answer.
func TestFetcherNotEarly(t *testing.T) {
	c := &Consumer{cfg: defaultCfg(), topic: "t", topicB: []byte("t")}
	near, far := net.Pipe()
	defer near.Close()
	defer far.Close()
	ps := []*cpart{{id: 0}, {id: 1}}
	f := &fetcher{c: c, addr: "x", parts: ps, pos: []int64{10, 20}, nc: near, version: 2}
	type res struct {
		a   *answer
		err error
	}
	done := make(chan res, 1)
	fetch := func() {
		go func() {
			a := &answer{f: f}
			err := f.fetch(a)
			done <- res{a, err}
		}()
	}
	answer := func(h wire.RequestHeader, order []uint32, mk func(id uint32) wire.FetchPart) []byte {
		var parts []wire.FetchPart
		for _, id := range order {
			parts = append(parts, mk(id))
		}
		r := wire.Response{Header: wire.ResponseHeader{RequestID: h.RequestID, APIKey: wire.APIFetchMulti},
			Body: &wire.FetchMultiResponse{Parts: parts, Version: 2}}
		return r.AppendTo(nil)
	}
	// 1: partition 0 out of range (log start 50), partition 1 records 20..21.
	fetch()
	h, _, order := readFetchMulti(t, far)
	frame := answer(h, order, func(id uint32) wire.FetchPart {
		if id == 0 {
			return wire.FetchPart{Partition: 0, Code: wire.CodeOffsetOutOfRange, LogStartOffset: 50, HighWatermark: 60, Checkpoint: -1, NextOffset: -1}
		}
		return wire.FetchPart{Partition: 1, HighWatermark: 100, Checkpoint: -1, NextOffset: 22, Records: testBatchAt(20, 2)}
	})
	far.Write(frame)
	r := <-done
	if r.err != nil || f.early || f.pos[0] != 50 || f.pos[1] != 22 || len(r.a.parts) != 2 {
		t.Fatalf("1: err %v early %v pos %v parts %d", r.err, f.early, f.pos, len(r.a.parts))
	}
	// 2: not early: the request goes out now, from 50 and 22; answer stale for partition 1
	// (says 30, records end at 25).
	fetch()
	h, asked, order := readFetchMulti(t, far)
	if asked[0] != 50 || asked[1] != 22 {
		t.Fatalf("2: asked %v", asked)
	}
	frame = answer(h, order, func(id uint32) wire.FetchPart {
		if id == 0 {
			return wire.FetchPart{Partition: 0, HighWatermark: 60, LogStartOffset: 50, Checkpoint: -1, NextOffset: 50}
		}
		return wire.FetchPart{Partition: 1, HighWatermark: 100, Checkpoint: -1, NextOffset: 30, Records: testBatchAt(22, 3)}
	})
	go far.Write(frame)
	_, asked3, _ := readFetchMulti(t, far) // early, from the table
	r = <-done
	if r.err != nil || f.stale == nil || len(r.a.parts) != 1 {
		t.Fatalf("2: err %v stale %v parts %d", r.err, f.stale, len(r.a.parts))
	}
	t.Logf("2: early request %v, pos %v, stale: %v", asked3, f.pos, f.stale)
}

// TestFetcherRefusesRepeatedPartition: an answer with as many parts as asked but one
// partition twice and another missing fails the fetch (the consumer then restarts from
// its cursors), in both layouts. A fake broker on a net.Pipe: a real one never sends it.
func TestFetcherRefusesRepeatedPartition(t *testing.T) {
	for _, version := range []uint16{1, 2} {
		c := &Consumer{cfg: defaultCfg(), topic: "t", topicB: []byte("t")}
		near, far := net.Pipe()
		f := &fetcher{c: c, addr: "x", parts: []*cpart{{id: 0}, {id: 1}}, pos: []int64{10, 20}, nc: near, version: version}
		done := make(chan error, 1)
		go func() { done <- f.fetch(&answer{f: f}) }()
		h, _, _ := readFetchMulti(t, far)
		parts := []wire.FetchPart{
			{Partition: 0, HighWatermark: 100, Checkpoint: -1, NextOffset: 13, Records: testBatchAt(10, 3)},
			{Partition: 0, HighWatermark: 100, Checkpoint: -1, NextOffset: 10},
		}
		resp := wire.Response{Header: wire.ResponseHeader{RequestID: h.RequestID, APIKey: wire.APIFetchMulti},
			Body: &wire.FetchMultiResponse{Parts: parts, Version: version}}
		go func() {
			far.Write(resp.AppendTo(nil))
			io.Copy(io.Discard, far) // a request sent early: the pipe takes it
		}()
		err := <-done
		near.Close()
		far.Close()
		if err == nil || !strings.Contains(err.Error(), "partition 0 twice") {
			t.Fatalf("version %d: %v, want an error for partition 0 twice", version, err)
		}
	}
}
