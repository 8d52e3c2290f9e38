package test

import (
	"testing"

	"sluice/internal/testbroker"
	"sluice/wire"
)

// metricsBroker starts a broker that serves its metrics, with a topic of one partition
// and a connection to it.
func metricsBroker(t *testing.T, topic string) (*testbroker.Broker, *wireConn) {
	t.Helper()
	b := testbroker.Start(t, t.TempDir(), "-metrics", "127.0.0.1:0")
	w := dial(t, b.Addr)
	createTopic(t, w, topic, 1)
	return b, w
}

// scrapeLabel reads metric{label="value"} from b's metrics.
func scrapeLabel(t *testing.T, b *testbroker.Broker, metric, label, value string) float64 {
	t.Helper()
	return scrape(t, b.MetricsAddr, metric+`{`+label+`="`+value+`"}`)
}

// TestRequestStages: the broker's stage histograms (sluice_request_stage_seconds, the
// broker's part of the bench's latency breakdown) count what they say, one observation
// per request: every produce a queue and an append; a long poll parked and woken by an
// append a wake (the append's) and a send (its answer with records); a fetch answered at
// once with records a send but no wake; an empty answer at the poll's deadline neither.
func TestRequestStages(t *testing.T) {
	b, w := metricsBroker(t, "st")
	count := func(stage string) float64 {
		return scrapeLabel(t, b, "sluice_request_stage_seconds_count", "stage", stage)
	}
	want := func(what string, queue, appends, wake, send float64) {
		t.Helper()
		for _, c := range []struct {
			stage string
			n     float64
		}{{"queue", queue}, {"append", appends}, {"wake", wake}, {"send", send}} {
			if got := count(c.stage); got != c.n {
				t.Fatalf("%s: stage %s counted %v, want %v", what, c.stage, got, c.n)
			}
		}
	}
	want("at start", 0, 0, 0, 0)
	produce := func(v string) {
		t.Helper()
		mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("st"), Version: 1, Batches: records(0, -1, v, 1)}))
	}
	produce("a")
	want("one produce", 1, 1, 0, 0)

	// A fetch with records there: answered at once, sent.
	fetch := func(offset int64, waitMs uint32) *wire.Response {
		return w.call(&wire.FetchMultiRequest{Topic: []byte("st"), MaxWaitMs: waitMs, MaxBytes: 1 << 20,
			Partitions: []wire.FetchMultiPartition{{Partition: 0, Offset: offset}}})
	}
	mustOK(t, fetch(0, 1000))
	waitMetric(t, b.MetricsAddr, `sluice_request_stage_seconds_count{stage="send"}`, 1)
	want("a fetch with records", 1, 1, 0, 1)

	// A long poll at the end, answered empty at its deadline: no wake, nothing sent.
	mustOK(t, fetch(1, 50))
	want("an empty long poll", 1, 1, 0, 1)

	// A long poll parked, then woken by an append on another connection.
	p := dial(t, b.Addr)
	id := p.send(&wire.FetchMultiRequest{Topic: []byte("st"), MaxWaitMs: 60_000, MaxBytes: 1 << 20,
		Partitions: []wire.FetchMultiPartition{{Partition: 0, Offset: 1}}})
	waitMetric(t, b.MetricsAddr, `sluice_parked_requests{kind="fetch"}`, 1)
	produce("b")
	resp := p.recv()
	mustOK(t, resp)
	if resp.Header.RequestID != id {
		t.Fatalf("answer to %d, want %d", resp.Header.RequestID, id)
	}
	waitMetric(t, b.MetricsAddr, `sluice_request_stage_seconds_count{stage="send"}`, 2)
	want("a woken long poll", 2, 2, 1, 2)
}
