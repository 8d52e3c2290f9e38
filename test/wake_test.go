package test

import (
	"fmt"
	"testing"

	"sluice/wire"
)

// TestLongPollWakes: an append wakes every long poll parked on its partition, whether
// the appending event loop answers them itself (a few, the partition's shard idle) or
// hands them to the shard (more than the loop takes on; broker/produce.go), and
// sluice_long_poll_wakes_total says which ran.
func TestLongPollWakes(t *testing.T) {
	b, w := metricsBroker(t, "wk")
	wakes := func(where string) float64 { return scrapeLabel(t, b, "sluice_long_poll_wakes_total", "where", where) }
	var offset int64
	round := func(polls int) {
		t.Helper()
		conns := make([]*wireConn, polls)
		ids := make([]uint32, polls)
		for i := range conns {
			conns[i] = dial(t, b.Addr)
			ids[i] = conns[i].send(&wire.FetchRequest{Topic: []byte("wk"), Offset: offset, MaxBytes: 1 << 20, MaxWaitMs: 60_000})
		}
		waitMetric(t, b.MetricsAddr, `sluice_parked_requests{kind="fetch"}`, float64(polls))
		v := fmt.Sprintf("r%d", offset)
		mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("wk"), Version: 1, Batches: records(0, -1, v, 1)}))
		for i, c := range conns {
			resp := c.recv()
			mustOK(t, resp)
			recs := resp.Body.(*wire.FetchResponse).Records
			if resp.Header.RequestID != ids[i] || len(recs) == 0 {
				t.Fatalf("poll %d of %d answered without the record", i, polls)
			}
		}
		offset++
	}
	// Two polls, five times: the shard is idle between rounds, so the loop answers
	// them (unless the shard was busy at that moment, every time).
	for range 5 {
		round(2)
	}
	if loop, shard := wakes("loop"), wakes("shard"); loop+shard != 5 || loop == 0 {
		t.Fatalf("five wakes of two polls: %v on the loop, %v on the shard", loop, shard)
	}
	// More polls than a loop answers itself: the shard wakes them.
	shard := wakes("shard")
	round(inlineWakeMaxPlus)
	if got := wakes("shard"); got != shard+1 {
		t.Fatalf("a wake of %d polls: shard wakes %v -> %v, want one more", inlineWakeMaxPlus, shard, got)
	}
}

// inlineWakeMaxPlus is one more long poll than an event loop answers itself
// (broker.inlineWakeMax).
const inlineWakeMaxPlus = 5
