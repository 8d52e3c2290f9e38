package test

import (
	"testing"
	"time"

	"sluice/internal/testbroker"
	"sluice/wire"
)

// TestPersisterParksAndResumes: with nothing waiting, a shard's persister parks instead
// of waking every fsync interval for nothing, and an append resumes it. Each produce
// below waits for durability (group fsync, so a persister pass must write and sync it)
// and is sent after the persisters parked; each must be answered as durable, and each
// must have resumed its shard's persister, rather than wait for a parked persister's
// once-a-second look (which would also make it durable, a second late): the resume
// counter tells the two apart without timing anything.
func TestPersisterParksAndResumes(t *testing.T) {
	// One shard, so one persister: the one that parks is the one the topic's appends resume.
	b := testbroker.Start(t, t.TempDir(), "-metrics", "127.0.0.1:0", "-log.fsync", "group", "-shards", "1")
	w := dial(t, b.Addr)
	createTopic(t, w, "pk", 1)
	const parkedSample, resumedSample = `sluice_persister_events_total{event="parked"}`, `sluice_persister_events_total{event="resumed"}`
	parks := 0.0 // parks seen before the last produce was sent
	for i := range 3 {
		// Parked again since the last produce resumed it (or parked at all, at first): a
		// parked persister counts no more parks until an append resumes it.
		waitAtLeast(t, b.MetricsAddr, parkedSample, parks+1)
		parks = scrape(t, b.MetricsAddr, parkedSample)
		resumed := scrape(t, b.MetricsAddr, resumedSample)
		r := w.call(&wire.ProduceRequest{Topic: []byte("pk"), Version: 1, WaitDurableMs: 60_000, Batches: records(0, -1, "p", 1)})
		mustOK(t, r)
		if pr := r.Body.(*wire.ProduceResponse); pr.BaseOffset != int64(i) || pr.Checkpoint < int64(i) {
			t.Fatalf("produce %d answered %+v, want base offset %d and a checkpoint covering it", i, pr, i)
		}
		if got := scrape(t, b.MetricsAddr, resumedSample); got != resumed+1 {
			t.Fatalf("produce %d after the persisters parked: %v resumes, want %v", i, got, resumed+1)
		}
	}
}

// waitAtLeast polls the broker's metrics until sample reaches at least want.
func waitAtLeast(t testing.TB, addr, sample string, want float64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if got := scrape(t, addr, sample); got >= want {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("%s is %v, want at least %v", sample, got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
