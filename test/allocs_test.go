package test

import (
	"bytes"
	"os"
	"strconv"
	"strings"
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
	b, round := longPollRounds(t)
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

// longPollRounds starts a broker with a topic of four partitions and returns it with
// round: round i sends a consumer's long poll over the four partitions at their ends,
// produces one record to partition i%4 on another connection (acknowledged on
// acceptance), and checks that the poll is answered with that record.
func longPollRounds(tb testing.TB) (*testbroker.Broker, func(i int)) {
	b := testbroker.Start(tb, tb.TempDir(), "-metrics", "127.0.0.1:0")
	w := dial(tb, b.Addr)
	p := dial(tb, b.Addr)
	createTopic(tb, w, "al", 4)
	_, version, _ := wire.APIFetchMulti.Versions()
	next := make([]int64, 4)
	parts := make([]wire.FetchMultiPartition, 4)
	return b, func(i int) {
		for k := range parts {
			parts[k] = wire.FetchMultiPartition{Partition: uint32(k), Offset: next[k]}
		}
		w.sendFetchMultiV(&wire.FetchMultiRequest{Topic: []byte("al"), MaxWaitMs: 60_000, MaxBytes: 1 << 20, Partitions: parts}, version)
		part := i % 4
		mustOK(tb, p.call(&wire.ProduceRequest{Topic: []byte("al"), Partition: uint32(part), Version: 1, Batches: records(0, -1, "a", 1)}))
		resp := w.recvFetchMultiV(version)
		mustOK(tb, resp)
		got := resp.Body.(*wire.FetchMultiResponse).Parts[part]
		if got.NextOffset != next[part]+1 {
			tb.Fatalf("round %d: partition %d answered up to %d, want %d", i, part, got.NextOffset, next[part]+1)
		}
		next[part] = got.NextOffset
	}
}

// BenchmarkLongPollRound times longPollRounds' round against a real broker process: a
// long poll over four partitions parked, woken by a one-record produce, answered. ns/op
// is the round's wall time (two requests and their answers over loopback, both
// processes' wake-ups); broker-µs/op is the broker process's processor time per round
// (/proc, in 10 ms ticks: run it long enough) and broker-allocs/op its heap allocations
// per round (go_memstats_mallocs_total, the scrapes included). Compare builds with
// alternating runs and benchstat.
func BenchmarkLongPollRound(b *testing.B) {
	br, round := longPollRounds(b)
	for i := range 400 { // the connections' slots, buffers and bodies made
		round(i)
	}
	const sample = "go_memstats_mallocs_total"
	allocs := scrape(b, br.MetricsAddr, sample)
	cpu := procTicks(b, br.Pid())
	b.ResetTimer()
	for i := range b.N {
		round(400 + i)
	}
	b.StopTimer()
	b.ReportMetric(float64(procTicks(b, br.Pid())-cpu)*1e4/float64(b.N), "broker-µs/op")
	b.ReportMetric((scrape(b, br.MetricsAddr, sample)-allocs)/float64(b.N), "broker-allocs/op")
}

// procTicks returns process pid's user and system time in clock ticks (/proc/pid/stat
// fields 14 and 15, counted after the command name's closing parenthesis).
func procTicks(tb testing.TB, pid int) int64 {
	tb.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		tb.Fatal(err)
	}
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		tb.Fatalf("/proc/%d/stat: %v %v", pid, err1, err2)
	}
	return utime + stime
}
