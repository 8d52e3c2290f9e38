package test

import (
	"testing"

	"sluice/internal/testbroker"
	"sluice/wire"
)

// TestBrokerAllocationsPerRequest: a consumer's long poll over four partitions, woken by
// a produce of one record on another connection, then answered with that record, is what
// a broker does thousands of times a second at a low rate (bench e2e), and it should cost
// next to no garbage: the request's slot and decoded body are reused, the produce's
// answer is built on the stack, and the long poll is one allocation. The broker's own
// count of heap allocations (go_memstats_mallocs_total) over 4 000 such rounds, 8 000
// requests, must stay under 2 a request; it was 17 before slots and bodies were
// reused (14 a request in an end-to-end run). It is about 0.5 now, the long poll's one
// (about 1 with the race detector's build, which allocates more on its own).
func TestBrokerAllocationsPerRequest(t *testing.T) {
	b := testbroker.Start(t, t.TempDir(), "-metrics", "127.0.0.1:0")
	w := dial(t, b.Addr)
	p := dial(t, b.Addr)
	createTopic(t, w, "al", 4)
	_, version, _ := wire.APIFetchMulti.Versions()
	next := make([]int64, 4)
	round := func(i int) {
		parts := make([]wire.FetchMultiPartition, 4)
		for k := range parts {
			parts[k] = wire.FetchMultiPartition{Partition: uint32(k), Offset: next[k]}
		}
		w.sendFetchMultiV(&wire.FetchMultiRequest{Topic: []byte("al"), MaxWaitMs: 60_000, MaxBytes: 1 << 20, Partitions: parts}, version)
		part := i % 4
		mustOK(t, p.call(&wire.ProduceRequest{Topic: []byte("al"), Partition: uint32(part), Version: 1, Batches: records(0, -1, "a", 1)}))
		resp := w.recvFetchMultiV(version)
		mustOK(t, resp)
		got := resp.Body.(*wire.FetchMultiResponse).Parts[part]
		if got.NextOffset != next[part]+1 {
			t.Fatalf("round %d: partition %d answered up to %d, want %d", i, part, got.NextOffset, next[part]+1)
		}
		next[part] = got.NextOffset
	}
	for i := range 400 { // the connections' slots, buffers and bodies made
		round(i)
	}
	const sample, rounds = "go_memstats_mallocs_total", 4000
	// A scrape allocates too, after it reads the count: what one costs is measured and
	// taken off.
	first := scrape(t, b.MetricsAddr, sample)
	before := scrape(t, b.MetricsAddr, sample)
	perScrape := before - first
	for i := range rounds {
		round(400 + i)
	}
	allocs := scrape(t, b.MetricsAddr, sample) - before - perScrape
	perRequest := allocs / (2 * rounds)
	t.Logf("%.0f allocations in %d requests (%.0f a scrape taken off): %.2f a request", allocs, 2*rounds, perScrape, perRequest)
	if perRequest >= 2 {
		t.Fatalf("%.2f heap allocations a request, want under 2", perRequest)
	}
}
