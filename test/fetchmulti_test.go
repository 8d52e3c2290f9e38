package test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"sluice/batch"
	"sluice/internal/testbroker"
	"sluice/wire"
)

// multiValues returns the record values of one part of a fetch_multi answer, from offset
// from on, checking every batch's CRC.
func multiValues(t *testing.T, p *wire.FetchPart, from int64) []string {
	t.Helper()
	var vals []string
	for rest := p.Records; len(rest) > 0; {
		var it batch.Iter
		if err := it.Reset(rest); err != nil {
			t.Fatalf("partition %d: %v", p.Partition, err)
		}
		for it.Next() {
			if r := it.Record(); r.Offset >= from {
				vals = append(vals, string(r.Value))
			}
		}
		h := it.Header()
		rest = rest[h.Size():]
	}
	return vals
}

// TestFetchMultiAnswersBusyPartition parks a fetch_multi on four empty partitions with a
// one-minute max wait, then produces to one of them: the answer must come with that
// partition's records and the others' offsets (a quiet partition never holds up a busy
// one). The read deadline of the connection (30 s) is what fails a request that waits
// for its max wait instead.
func TestFetchMultiAnswersBusyPartition(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	w := dial(t, b.Addr)
	createTopic(t, w, "m", 4)
	parts := []wire.FetchMultiPartition{{Partition: 0}, {Partition: 1}, {Partition: 2}, {Partition: 3}}
	id := w.send(&wire.FetchMultiRequest{Topic: []byte("m"), MaxWaitMs: 60_000, MaxBytes: 1 << 20, Partitions: parts})
	p := dial(t, b.Addr)
	t0 := time.Now()
	mustOK(t, p.call(&wire.ProduceRequest{Topic: []byte("m"), Partition: 2, Version: 1, Batches: records(0, -1, "two", 3)}))
	resp := w.recv()
	t.Logf("answered %v after the produce", time.Since(t0))
	mustOK(t, resp)
	if resp.Header.RequestID != id {
		t.Fatalf("answer to %d, want %d", resp.Header.RequestID, id)
	}
	body := resp.Body.(*wire.FetchMultiResponse)
	if len(body.Parts) != 4 {
		t.Fatalf("%d parts, want 4", len(body.Parts))
	}
	for i, part := range body.Parts {
		switch got := multiValues(t, &part, 0); {
		case part.Partition != uint32(i) || part.Code != wire.CodeNone:
			t.Fatalf("part %d: partition %d code %v", i, part.Partition, part.Code)
		case i == 2 && fmt.Sprint(got) != "[two-0 two-1 two-2]":
			t.Fatalf("partition 2: %v", got)
		case i == 2 && part.HighWatermark != 3:
			t.Fatalf("partition 2: high watermark %d", part.HighWatermark)
		case i != 2 && (len(got) != 0 || part.HighWatermark != 0):
			t.Fatalf("partition %d: %v, high watermark %d", i, got, part.HighWatermark)
		}
	}
	// The single-partition fetch still works beside it.
	if got := fetchValues(t, w, "m", 2, 1); fmt.Sprint(got) != "[two-1 two-2]" {
		t.Fatalf("fetch: %v", got)
	}
}

// onDiskThenRestart creates topic with 3 partitions, writes 8 batches of 50 records
// ("disk<i>-<j>") to partitions 0 and 2, and restarts the broker, so that they are read
// from the segment files only (partition 1 stays empty); it returns a connection to the
// restarted broker.
func onDiskThenRestart(t *testing.T, b *testbroker.Broker, topic string) *wireConn {
	t.Helper()
	w := dial(t, b.Addr)
	createTopic(t, w, topic, 3)
	for _, part := range []uint32{0, 2} {
		for i := range 8 {
			mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte(topic), Partition: part, Version: 1,
				Batches: records(0, -1, fmt.Sprintf("disk%d", i), 50)}))
		}
	}
	b.Stop()
	b.Restart()
	return dial(t, b.Addr)
}

// TestFetchMultiSendfileAndMemory reads, in one fetch_multi answer, a partition whose
// data is only in segment files (written before a restart: sent by sendfile) and one
// whose data is in the arena (produced after it: sent by writev), and checks both
// partitions' records and the broker's sendfile counter. It also checks the per-part
// errors (an unknown partition, an offset past the end) and the byte budget.
func TestFetchMultiSendfileAndMemory(t *testing.T) {
	b := testbroker.Start(t, t.TempDir(), "-metrics", "127.0.0.1:0")
	w := onDiskThenRestart(t, b, "s")
	mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("s"), Partition: 1, Version: 1, Batches: records(0, -1, "mem", 5)}))
	sent0 := scrape(t, b.MetricsAddr, `sluice_fetch_bytes_total{path="sendfile"}`)
	resp := w.call(&wire.FetchMultiRequest{Topic: []byte("s"), MaxBytes: 8 << 20, Partitions: []wire.FetchMultiPartition{
		{Partition: 0, Offset: 10}, {Partition: 1, Offset: 0}, {Partition: 7}, {Partition: 2, Offset: 999}}})
	mustOK(t, resp)
	parts := resp.Body.(*wire.FetchMultiResponse).Parts
	disk := multiValues(t, &parts[0], 10)
	if len(disk) != 8*50-10 || disk[0] != "disk0-10" || disk[len(disk)-1] != "disk7-49" {
		t.Fatalf("segment partition: %d values, %v ... %v", len(disk), disk[:1], disk[len(disk)-1:])
	}
	if mem := multiValues(t, &parts[1], 0); fmt.Sprint(mem) != "[mem-0 mem-1 mem-2 mem-3 mem-4]" {
		t.Fatalf("memory partition: %v", mem)
	}
	if parts[2].Code != wire.CodeUnknownPartition || parts[3].Code != wire.CodeOffsetOutOfRange || parts[3].HighWatermark != 400 {
		t.Fatalf("error parts: %+v, %+v", parts[2], parts[3])
	}
	if sent := scrape(t, b.MetricsAddr, `sluice_fetch_bytes_total{path="sendfile"}`) - sent0; sent < float64(len(parts[0].Records)) {
		t.Fatalf("sendfile sent %v bytes for %d bytes of segment records", sent, len(parts[0].Records))
	}
	// A budget of 1 byte: the first partition gets one whole batch, the next none.
	resp = w.call(&wire.FetchMultiRequest{Topic: []byte("s"), MaxBytes: 1, Partitions: []wire.FetchMultiPartition{
		{Partition: 1}, {Partition: 0}}})
	mustOK(t, resp)
	parts = resp.Body.(*wire.FetchMultiResponse).Parts
	if got := multiValues(t, &parts[0], 0); len(got) != 5 || parts[1].Records != nil || parts[1].HighWatermark != 400 {
		t.Fatalf("budget of 1 byte: %d values first, then %d bytes (high watermark %d)", len(got), len(parts[1].Records), parts[1].HighWatermark)
	}
}

// TestFetchMultiBadRequests sends fetch_multi requests the broker must refuse with a
// clear code and no crash: an unknown topic (the whole request), then a malformed body
// (fatal: the connection closes); a new connection still works.
func TestFetchMultiBadRequests(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	w := dial(t, b.Addr)
	createTopic(t, w, "x", 1)
	resp := w.call(&wire.FetchMultiRequest{Topic: []byte("nope"), Partitions: []wire.FetchMultiPartition{{}}})
	if resp.Header.Code != wire.CodeUnknownTopic || resp.Body != nil {
		t.Fatalf("unknown topic: %v %v", resp.Header.Code, resp.Body)
	}
	resp = w.call(&wire.FetchMultiRequest{Topic: []byte("x")}) // no partitions
	if resp.Header.Code != wire.CodeMalformed {
		t.Fatalf("no partitions: %v", resp.Header.Code)
	}
	w = dial(t, b.Addr)
	// A partition listed twice: each listed partition costs the broker a read and a
	// parked waiter, so 4096 copies of one would cost 4096 of each.
	resp = w.call(&wire.FetchMultiRequest{Topic: []byte("x"), Partitions: []wire.FetchMultiPartition{{}, {Offset: 5}}})
	if resp.Header.Code != wire.CodeMalformed || !strings.Contains(resp.Text, "listed twice") {
		t.Fatalf("a partition listed twice: %v %q", resp.Header.Code, resp.Text)
	}
	w = dial(t, b.Addr)
	resp = w.call(&wire.FetchMultiRequest{Topic: []byte("x"), Partitions: []wire.FetchMultiPartition{{}}})
	mustOK(t, resp)
}

// TestFetchMultiBudgetLaterPartitions: three partitions hold one batch of about 600 KB
// each, read with a budget of 1 MiB. The first partition gets its batch; the others,
// whose batch does not fit in what is left, get their offsets and no records
// (docs/protocol.md: only the first partition with records may pass the budget). Before,
// every partition got a whole batch, and an answer could pass its budget by up to a
// batch of 64 MiB per partition.
func TestFetchMultiBudgetLaterPartitions(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	w := dial(t, b.Addr)
	createTopic(t, w, "big", 3)
	for part := range uint32(3) {
		var bld batch.Builder
		bld.Reset(nil, 0, -1)
		for i := range 600 {
			bld.Add(uint16(i), time.Now().UnixMilli(), nil, make([]byte, 1000))
		}
		mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("big"), Partition: part, Version: 1, Batches: bld.Finish()}))
	}
	for _, order := range [][]uint32{{0, 1, 2}, {2, 0, 1}} {
		req := &wire.FetchMultiRequest{Topic: []byte("big"), MaxBytes: 1 << 20}
		for _, p := range order {
			req.Partitions = append(req.Partitions, wire.FetchMultiPartition{Partition: p})
		}
		resp := w.call(req)
		mustOK(t, resp)
		parts := resp.Body.(*wire.FetchMultiResponse).Parts
		if n := len(multiValues(t, &parts[0], 0)); n != 600 {
			t.Fatalf("order %v: the first partition got %d records, want its batch of 600", order, n)
		}
		for _, p := range parts[1:] {
			if len(p.Records) != 0 || p.HighWatermark != 600 {
				t.Fatalf("order %v: partition %d got %d bytes of records (high watermark %d) past a budget its batch does not fit",
					order, p.Partition, len(p.Records), p.HighWatermark)
			}
		}
	}
}

// TestFetchMultiV1NextOffsets reads, with fetch_multi versions 1 and 2 (the part table
// first), a partition from its segment files (sendfile) and one from the arena (writev),
// whole and within small budgets, and two segment regions in a row (in version 2 the
// second part is a file region alone), and checks each part's next offset against its
// records: the last batch's last offset + 1, the offset asked for without records, -1
// with an error code.
func TestFetchMultiV1NextOffsets(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	w := onDiskThenRestart(t, b, "n")
	for i := range 3 {
		mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("n"), Partition: 1, Version: 1,
			Batches: records(0, -1, fmt.Sprintf("mem%d", i), 5)}))
	}
	// lastOf is the offset after the last batch of a part's records.
	lastOf := func(p *wire.FetchPart) int64 {
		var next int64 = -1
		for rest := p.Records; len(rest) > 0; {
			h, err := batch.ParseHeader(rest)
			if err != nil {
				t.Fatal(err)
			}
			next, rest = h.LastOffset()+1, rest[h.Size():]
		}
		return next
	}
	for _, c := range []struct {
		name     string
		maxBytes uint32
		parts    []wire.FetchMultiPartition
		want     []int64 // next offset per part
	}{
		{"whole", 8 << 20, []wire.FetchMultiPartition{{Partition: 0, Offset: 10}, {Partition: 1, Offset: 3},
			{Partition: 7}, {Partition: 2, Offset: 999}}, []int64{400, 15, -1, -1}},
		{"one batch from the segment, none from memory", 1, []wire.FetchMultiPartition{{Partition: 0, Offset: 120},
			{Partition: 1, Offset: 2}}, []int64{150, 2}},
		{"one batch from memory, none from the segment", 1, []wire.FetchMultiPartition{{Partition: 1, Offset: 6},
			{Partition: 0, Offset: 0}}, []int64{10, 0}},
		{"two segment batches", 2 * 50 * 20, []wire.FetchMultiPartition{{Partition: 0, Offset: 200}}, []int64{300}},
		{"at the end", 1 << 20, []wire.FetchMultiPartition{{Partition: 0, Offset: 400}, {Partition: 1, Offset: 15}},
			[]int64{400, 15}},
		{"two segment regions in a row", 1 << 20, []wire.FetchMultiPartition{{Partition: 0, Offset: 10}, {Partition: 2, Offset: 300},
			{Partition: 1, Offset: 0}}, []int64{400, 400, 15}},
	} {
		for _, version := range []uint16{1, 2} {
			resp := w.callFetchMultiV(&wire.FetchMultiRequest{Topic: []byte("n"), MaxBytes: c.maxBytes, Partitions: c.parts}, version)
			mustOK(t, resp)
			parts := resp.Body.(*wire.FetchMultiResponse).Parts
			for i := range parts {
				p := &parts[i]
				if p.NextOffset != c.want[i] {
					t.Errorf("version %d, %s: part %d (partition %d at %d, %d bytes): next offset %d, want %d", version, c.name, i,
						c.parts[i].Partition, c.parts[i].Offset, len(p.Records), p.NextOffset, c.want[i])
				}
				if p.Records != nil && lastOf(p) != p.NextOffset {
					t.Errorf("version %d, %s: part %d: records end at %d, next offset %d", version, c.name, i, lastOf(p), p.NextOffset)
				}
			}
			if c.name == "two segment regions in a row" {
				if got := multiValues(t, &parts[1], 300); len(got) != 100 || got[0] != "disk6-0" {
					t.Errorf("version %d: the second region: %d values from %v", version, len(got), got[:min(1, len(got))])
				}
			}
		}
	}
	// Version 0 on the same connection still answers in its own layout.
	resp := w.call(&wire.FetchMultiRequest{Topic: []byte("n"), MaxBytes: 1 << 20, Partitions: []wire.FetchMultiPartition{{Partition: 1}}})
	mustOK(t, resp)
	if got := multiValues(t, &resp.Body.(*wire.FetchMultiResponse).Parts[0], 0); len(got) != 15 {
		t.Fatalf("version 0 after version 1: %d values, want 15", len(got))
	}
}
