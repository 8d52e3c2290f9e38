package test

import (
	"bytes"
	"testing"

	"sluice/batch"
	"sluice/internal/testbroker"
	"sluice/wire"
)

// TestBusyAnswerCarriesPrefixOffsets: a request larger than arena.partition_max,
// refused busy midway, is answered with the offsets of the prefix it appended
// (docs/protocol.md), exactly those records: a producer without an id resends only the
// rest. (produceTask.answer set them to -1 for every refusal, so the answer said
// "nothing appended" while the log held the prefix: a review.)
func TestBusyAnswerCarriesPrefixOffsets(t *testing.T) {
	b := testbroker.Start(t, t.TempDir(), "-arena.size", "8MiB", "-arena.partition_max", "256KiB", "-log.fsync_interval", "1h")
	defer b.Stop()
	w := dial(t, b.Addr)
	createTopic(t, w, "p", 1)
	big := func() []byte {
		var bb batch.Builder
		bb.Reset(nil, -1, -1)
		bb.Add(0, 1_700_000_000_000, nil, bytes.Repeat([]byte{'x'}, 90_000))
		return bb.Finish()
	}
	var req []byte
	for range 5 { // 450 KB in all: more than partition_max, batch by batch
		req = append(req, big()...)
	}
	resp := w.call(&wire.ProduceRequest{Topic: []byte("p"), Partition: 0, Version: 1, Batches: req})
	pr, _ := resp.Body.(*wire.ProduceResponse)
	t.Logf("code %v body %+v", resp.Header.Code, pr)
	if resp.Header.Code != wire.CodeBusy { // nothing persists for an hour: 450 KB cannot fit 256 KiB
		t.Fatalf("a request over partition_max with nothing durable: %v, want busy", resp.Header.Code)
	}
	end := fetchValues(t, w, "p", 0, 0)
	if len(end) == 0 {
		t.Fatal("no prefix appended: the test shows nothing")
	}
	if pr == nil || pr.BaseOffset != 0 || pr.LastOffset != int64(len(end))-1 {
		t.Fatalf("busy answer with offsets %+v, yet the log holds the request's first %d records", pr, len(end))
	}
}
