package test

import (
	"fmt"
	"testing"

	"sluice/internal/testbroker"
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

// TestInlineWakeArenaMiss: an event loop that answers the long polls an append woke
// reads memory only; when the records are not in the arena it hands the polls to the
// partition's shard, whose goroutine reads them (broker/produce.go, part.read). Both a
// fetch and a fetch_multi parked there are answered with the record, never with an
// empty answer. The miss is the failpoint arena_miss (the one fake here: the arena
// cannot be made to reclaim records between an append and its wake-up on cue), which
// also makes a read that may touch the disk panic when it runs on the loop (so the poll
// would go unanswered and this test fail: broker part.read); each kind
// of poll is parked until one of its wakes ran on the loop (the shard may be busy at the
// moment of an append, and then the wake is the shard's anyway).
func TestInlineWakeArenaMiss(t *testing.T) {
	const topic = "am"
	b := testbroker.StartEnv(t, t.TempDir(), []string{"SLUICE_FAILPOINTS=arena_miss=" + topic}, "-metrics", "127.0.0.1:0")
	w := dial(t, b.Addr)
	createTopic(t, w, topic, 2)
	loopWakes := func() float64 { return scrapeLabel(t, b, "sluice_long_poll_wakes_total", "where", "loop") }
	var offset int64
	for _, multi := range []bool{false, true} {
		for round := 0; ; round++ {
			if round == 20 {
				t.Fatalf("multi %v: no wake ran on the event loop in 20 rounds", multi)
			}
			before := loopWakes()
			c := dial(t, b.Addr)
			var req wire.Body = &wire.FetchRequest{Topic: []byte(topic), Offset: offset, MaxBytes: 1 << 20, MaxWaitMs: 60_000}
			parked := 1.0
			if multi {
				req = &wire.FetchMultiRequest{Topic: []byte(topic), MaxWaitMs: 60_000, MaxBytes: 1 << 20,
					Partitions: []wire.FetchMultiPartition{{Partition: 0, Offset: offset}, {Partition: 1}}}
				parked = 2 // a waiter on each partition
			}
			id := c.send(req)
			waitMetric(t, b.MetricsAddr, `sluice_parked_requests{kind="fetch"}`, parked)
			v := fmt.Sprintf("m%d", offset)
			mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte(topic), Version: 1, Batches: records(0, -1, v, 1)}))
			resp := c.recv()
			mustOK(t, resp)
			var got []string
			if multi {
				part := resp.Body.(*wire.FetchMultiResponse).Parts[0]
				got = multiValues(t, &part, offset)
			} else {
				got = multiValues(t, &wire.FetchPart{Records: resp.Body.(*wire.FetchResponse).Records}, offset)
			}
			if resp.Header.RequestID != id || fmt.Sprint(got) != "["+v+"-0]" {
				t.Fatalf("multi %v, offset %d: answered %v (request %d of %d)", multi, offset, got, resp.Header.RequestID, id)
			}
			waitMetric(t, b.MetricsAddr, `sluice_parked_requests{kind="fetch"}`, 0)
			offset++
			if loopWakes() > before {
				break
			}
		}
	}
}
