package test

import (
	"testing"
	"time"

	"sluice/internal/testbroker"
	"sluice/wire"
)

// TestShardMetrics: the shard figures on /metrics count what the shard ran. A broker
// with one shard gets five long polls, each parked on the shard (a fetch is always
// queued to its partition's shard: a goroutine task) and then woken by a produce, which
// the appending event loop answers itself when the shard is idle (an inline task, also
// counted as a wake on the loop) or queues to the shard. So the goroutine tasks grow by
// at least five, the inline tasks by exactly the wakes on the loop, the wake-ups of the
// parked shard by at least one, and the tasks of both kinds by at least ten.
func TestShardMetrics(t *testing.T) {
	b := testbroker.Start(t, t.TempDir(), "-metrics", "127.0.0.1:0", "-shards", "1")
	w := dial(t, b.Addr)
	p := dial(t, b.Addr)
	createTopic(t, w, "sm", 1)
	const (
		goroutine = `sluice_shard_tasks_total{run="goroutine",shard="0"}`
		inline    = `sluice_shard_tasks_total{run="inline",shard="0"}`
		wakeups   = `sluice_shard_wakeups_total{shard="0"}`
		loopWakes = `sluice_long_poll_wakes_total{where="loop"}`
		refused   = `sluice_shard_refused_tasks_total{shard="0"}`
	)
	figures := func() map[string]float64 {
		m := map[string]float64{}
		for _, s := range []string{goroutine, inline, wakeups, loopWakes, refused} {
			m[s] = scrape(t, b.MetricsAddr, s)
		}
		return m
	}
	before := figures()
	for i := range int64(5) {
		id := w.send(&wire.FetchRequest{Topic: []byte("sm"), Offset: i, MaxBytes: 1 << 20, MaxWaitMs: 60_000})
		waitAtLeast(t, b.MetricsAddr, `sluice_parked_requests{kind="fetch"}`, 1)
		mustOK(t, p.call(&wire.ProduceRequest{Topic: []byte("sm"), Version: 1, Batches: records(0, -1, "s", 1)}))
		resp := w.recv()
		mustOK(t, resp)
		if resp.Header.RequestID != id || len(resp.Body.(*wire.FetchResponse).Records) == 0 {
			t.Fatalf("poll %d: answer to %d with %d bytes of records", i, resp.Header.RequestID, len(resp.Body.(*wire.FetchResponse).Records))
		}
	}
	// A shard counts a task once its batch of tasks has run, so the last wake may be
	// counted just after its answer arrived: the figures are read until they add up.
	var after map[string]float64
	d := func(s string) float64 { return after[s] - before[s] }
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		after = figures()
		if d(goroutine) >= 5 && d(goroutine)+d(inline) >= 10 && d(inline) == d(loopWakes) || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("goroutine tasks +%v, inline +%v, wake-ups +%v, wakes on the loop +%v", d(goroutine), d(inline), d(wakeups), d(loopWakes))
	switch {
	case d(goroutine) < 5:
		t.Fatalf("goroutine tasks +%v, want at least 5 (one per fetch)", d(goroutine))
	case d(inline) != d(loopWakes):
		t.Fatalf("inline tasks +%v, wakes on the loop +%v: want them equal", d(inline), d(loopWakes))
	case d(goroutine)+d(inline) < 10:
		t.Fatalf("tasks +%v, want at least 10 (a fetch and a wake each round)", d(goroutine)+d(inline))
	case d(wakeups) < 1:
		t.Fatalf("the parked shard woke %v times, want at least 1", d(wakeups))
	case d(refused) != 0:
		t.Fatalf("%v tasks refused, want none", d(refused))
	}
}
