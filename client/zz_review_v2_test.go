package client

import (
	"io"
	"net"
	"testing"
	"time"

	"sluice/batch"
	"sluice/wire"
)

// reviewBatch returns a batch of count records at base.
func reviewBatch(base int64, count int) []byte {
	var b batch.Builder
	b.Reset(nil, 0, -1)
	for i := range count {
		b.Add(uint16(i), 1, nil, []byte("v"))
	}
	out := b.Finish()
	batch.SetBaseOffset(out, base)
	return out
}

// readReq reads one fetch_multi request from far.
func readReq(t *testing.T, far net.Conn) (wire.RequestHeader, map[uint32]int64, []uint32) {
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

// TestReviewV2EarlyRotated: a lane of three partitions, the answer in the rotated request
// order with one part empty; the next request must leave after the table only, with the
// table's offsets; then an answer with offset_out_of_range is not early, and a stale one
// is handed over and ends the fetcher.
func TestReviewV2EarlyRotated(t *testing.T) {
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
	h, asked, order := readReq(t, far)
	if asked[0] != 10 || asked[1] != 20 || asked[2] != 30 {
		t.Fatalf("first request %v", asked)
	}
	recs := map[uint32][]byte{1: reviewBatch(20, 5), 0: reviewBatch(10, 3)}
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
	_, asked2, _ := readReq(t, far)
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
