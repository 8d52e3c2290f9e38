package test

import (
	"fmt"
	"strings"
	"testing"

	"sluice/internal/testbroker"
	"sluice/wire"
)

// TestPartitionLogBytes: sluice_partition_log_bytes is the bytes of record batches in a
// partition's segment files: the batches produced, once durable, over several segments
// (not the active file's preallocation). After a restart, where the sealed segments are
// sized lazily, the first retention check (here every 100 ms, on a topic without
// retention) brings it back to the same figure.
func TestPartitionLogBytes(t *testing.T) {
	b := testbroker.Start(t, t.TempDir(), "-metrics", "127.0.0.1:0", "-broker.retention_check", "100ms")
	w := dial(t, b.Addr)
	mustOK(t, w.call(&wire.CreateTopicRequest{Name: "lb", Partitions: 1,
		Options: wire.TopicOptions{RetentionMs: -1, RetentionBytes: -1, SegmentBytes: 64 << 10, SegmentMs: -1}}))
	const sample = `sluice_partition_log_bytes{partition="0",topic="lb"}`
	if n := scrape(t, b.MetricsAddr, sample); n != 0 {
		t.Fatalf("an empty partition holds %v bytes", n)
	}
	pad := strings.Repeat("x", 300)
	var want float64
	for i := range 100 { // about 1.2 MB: 19 segments of 64 KiB
		batch := records(0, -1, fmt.Sprintf("%s%d", pad, i), 40)
		produceWaitBatch(t, w, "lb", batch)
		want += float64(len(batch))
	}
	if n := scrape(t, b.MetricsAddr, sample); n != want {
		t.Fatalf("%s is %v after %v bytes of batches were made durable", sample, n, want)
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	b.Restart()
	pollFor(t, "the log's bytes counted again after the restart", func() bool {
		n := scrape(t, b.MetricsAddr, sample)
		if n > want {
			t.Fatalf("%s is %v after the restart, more than the %v bytes written", sample, n, want)
		}
		return n == want
	})
}
