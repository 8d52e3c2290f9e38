package test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sluice/internal/testbroker"
	"sluice/persist/vfs"
	"sluice/wire"
)

// TestRetentionReusesSegmentFilesAcrossKill: a broker process whose retention deletes
// segments as fast as it writes them starts its new segments in the deleted files
// (log.segment_reuse; persist/local/reuse.go) instead of creating files and unlinking
// the old ones. SIGKILLed while it does, and restarted, it still holds every record it
// acknowledged from its start on, whole and in order, the segments written into reused
// files included, and it goes on reusing files after the restart.
func TestRetentionReusesSegmentFilesAcrossKill(t *testing.T) {
	const perBatch = 40
	dir := t.TempDir()
	skipWithoutZeroRange(t, dir)
	b := testbroker.Start(t, dir, "-metrics", "127.0.0.1:0", "-broker.retention_check", "100ms")
	w := dial(t, b.Addr)
	mustOK(t, w.call(&wire.CreateTopicRequest{Name: "reuse", Partitions: 1,
		Options: wire.TopicOptions{RetentionMs: -1, RetentionBytes: 256 << 10, SegmentBytes: 64 << 10, SegmentMs: -1}}))
	pad := strings.Repeat("x", 200)
	next := 0 // batches acknowledged
	produce := func(n int) {
		for range n {
			// Acknowledged once durable: every batch acknowledged must survive the kill.
			produceWaitBatch(t, w, "reuse", records(0, -1, fmt.Sprintf("%s%d", pad, next), perBatch))
			next++
		}
	}
	reused := func() float64 {
		return scrape(t, b.MetricsAddr, `sluice_partition_segments_reused_total{partition="0",topic="reuse"}`)
	}
	produce(300) // about 40 segments of 64 KiB: retention deletes most of them
	pollFor(t, "a segment started in a file retention deleted", func() bool {
		produce(10)
		return reused() > 0
	})
	before := reused()
	// Killed while it works: 40 batches sent at once, not waited for. Those it wrote
	// survive or not, each whole: the log goes on from wherever it ends.
	acked := next
	for i := range 40 {
		w.send(&wire.ProduceRequest{Topic: []byte("reuse"), Version: 1,
			Batches: records(0, -1, fmt.Sprintf("%s%d", pad, next+i), perBatch)})
	}
	time.Sleep(3 * time.Millisecond)
	b.Kill()
	b.Restart()
	w = dial(t, b.Addr)
	resp := w.call(&wire.ListOffsetsRequest{Topic: []byte("reuse"), Partition: 0, Timestamp: wire.TimestampLatest})
	mustOK(t, resp)
	hw := resp.Body.(*wire.ListOffsetsResponse).Offset
	if hw%perBatch != 0 || hw < int64(acked*perBatch) || hw > int64((acked+40)*perBatch) {
		t.Fatalf("after the kill the log ends at %d: not whole batches of %d from the %d acknowledged, plus at most 40", hw, perBatch, acked)
	}
	next = int(hw / perBatch)
	produce(300)
	pollFor(t, "a segment started in a reused file after the restart", func() bool {
		produce(10)
		return reused() > 0
	})
	// Retention (every 100 ms) may delete the oldest segments while they are read. With
	// the produces over it deletes only down to its byte limit, so a read it overtakes
	// (offset_out_of_range) starts again from the log's new start, and one soon holds.
	var start int64
	var vals []string
	pollFor(t, "a read of the whole log that retention did not overtake", func() bool {
		resp := w.call(&wire.ListOffsetsRequest{Topic: []byte("reuse"), Partition: 0, Timestamp: wire.TimestampEarliest})
		mustOK(t, resp)
		start = resp.Body.(*wire.ListOffsetsResponse).Offset
		var failed *wire.Response
		vals, failed = tryFetchValues(t, w, "reuse", 0, start)
		if failed != nil && failed.Header.Code != wire.CodeOffsetOutOfRange {
			mustOK(t, failed)
		}
		return failed == nil
	})
	if start == 0 {
		t.Fatal("retention deleted nothing")
	}
	if want := int64(next*perBatch) - start; int64(len(vals)) != want {
		t.Fatalf("read %d records from offset %d, want %d (%d batches acknowledged)", len(vals), start, want, next)
	}
	for k, v := range vals {
		o := start + int64(k)
		if want := fmt.Sprintf("%s%d-%d", pad, o/perBatch, o%perBatch); v != want {
			t.Fatalf("offset %d holds %q, want %q", o, strings.TrimLeft(v, "x"), strings.TrimLeft(want, "x"))
		}
	}
	t.Logf("%.0f segments started in reused files before the kill, %.0f after; %d of the 40 batches in flight kept; log starts at %d of %d",
		before, reused(), int(hw/perBatch)-acked, start, next*perBatch)
}

// skipWithoutZeroRange skips the test where the filesystem of dir cannot zero a file in
// place (vfs.File.Zero, as the broker's segment reuse does; it turns itself off there:
// persist/local's TestReuseOnTmpfs). Any other error of the probe fails the test.
func skipWithoutZeroRange(t *testing.T, dir string) {
	t.Helper()
	probe := filepath.Join(dir, "zero-probe")
	f, err := vfs.Default().Create(probe)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Zero(0, vfs.DirectAlign)
	f.Close()
	os.Remove(probe)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		t.Skipf("the filesystem of %s cannot zero a file in place: %v", dir, err)
	case err != nil:
		t.Fatal(err)
	}
}
