package test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"sluice/internal/testbroker"
	"sluice/wire"
)

// TestRetentionReapsDeletedSegments: a broker whose retention deletes segments as they
// are produced hands their files to its reaper (broker/reaper.go), which removes them off
// the partition's shard: once retention has run, no segment is left behind, neither as
// a .log nor as a *.deleted file waiting for removal, the log starts past its first
// offset, and what it still holds reads back whole.
func TestRetentionReapsDeletedSegments(t *testing.T) {
	dir := t.TempDir()
	b := testbroker.Start(t, dir, "-broker.retention_check", "50ms")
	w := dial(t, b.Addr)
	mustOK(t, w.call(&wire.CreateTopicRequest{Name: "ret", Partitions: 1,
		Options: wire.TopicOptions{RetentionMs: -1, RetentionBytes: 8 << 10, SegmentBytes: 4 << 10, SegmentMs: -1}}))
	var last int64
	for i := range 60 {
		last = produceWaitBatch(t, w, "ret", records(0, -1, fmt.Sprintf("v%d", i), 40)).LastOffset
	}
	count := func(pattern string) int {
		files, _ := filepath.Glob(filepath.Join(dir, "ret", "0", pattern))
		return len(files)
	}
	var start int64
	steady := 0 // retention passes (50 ms apart) with the same start: it has nothing left to delete
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		resp := w.call(&wire.ListOffsetsRequest{Topic: []byte("ret"), Partition: 0, Timestamp: wire.TimestampEarliest})
		mustOK(t, resp)
		was := start
		start = resp.Body.(*wire.ListOffsetsResponse).Offset
		if start == was {
			steady++
		} else {
			steady = 0
		}
		// 8 KiB kept in segments of 4 KiB: three or four of them, the active one included.
		if start > 0 && steady >= 6 && count("*.log") <= 4 && count("*.deleted") == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after retention: log starts at %d, %d .log and %d .deleted files", start,
				count("*.log"), count("*.deleted"))
		}
	}
	if got := fetchValues(t, w, "ret", 0, start); int64(len(got)) != last+1-start {
		t.Fatalf("read %d records from %d, want %d (to %d)", len(got), start, last+1-start, last)
	}
}
