package test

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sluice/broker"
	"sluice/persist/vfs"
	"sluice/persist/vfs/errorfs"
	"sluice/wire"
)

// hangRemoves is an errorfs injector that, once armed, holds every removal of a segment's
// file (live or renamed *.deleted) until release is closed: an unlink that hangs, as on a
// filesystem stuck on its device, which a real disk cannot be made to do on cue.
type hangRemoves struct {
	armed   atomic.Bool
	held    atomic.Int64  // removals waiting
	first   chan struct{} // closed when the first removal is held
	release chan struct{}
	once    sync.Once
}

func (h *hangRemoves) MaybeError(op errorfs.Op, path string) error {
	name := filepath.Base(path)
	if op != errorfs.OpRemove || !h.armed.Load() ||
		!(strings.Contains(name, ".log") || strings.Contains(name, ".index") || strings.Contains(name, ".timeindex")) {
		return nil
	}
	h.held.Add(1)
	h.once.Do(func() { close(h.first) })
	<-h.release
	h.held.Add(-1)
	return nil
}

// TestReaperHungHoldsNoPartition: the files retention deletes are removed by the broker's
// reaper goroutine, never on the partition's shard (broker/reaper.go). With every removal
// hanging, the partition still takes produces, answers fetches (which run on its shard)
// and applies retention again: the renamed *.deleted files pile up, and go once the
// filesystem answers. (With the unlinks on the shard, the first fetch after the hang
// would wait for the filesystem and fail on its 30 s read deadline.)
func TestReaperHungHoldsNoPartition(t *testing.T) {
	dir := t.TempDir()
	h := &hangRemoves{first: make(chan struct{}), release: make(chan struct{})}
	b, _ := startInProcessAt(t, dir, errorfs.Wrap(vfs.Default(), h), 4<<10,
		func(c *broker.Config) { c.RetentionCheck = 20 * time.Millisecond })
	var released sync.Once
	free := func() { released.Do(func() { close(h.release) }) }
	t.Cleanup(free) // before the broker's shutdown (cleanups run last first)
	w := dial(t, b.Addr())
	mustOK(t, w.call(&wire.CreateTopicRequest{Name: "reap", Partitions: 1,
		Options: wire.TopicOptions{RetentionMs: -1, RetentionBytes: 8 << 10, SegmentBytes: 4 << 10, SegmentMs: -1}}))
	h.armed.Store(true)

	earliest := func() int64 {
		resp := w.call(&wire.ListOffsetsRequest{Topic: []byte("reap"), Partition: 0, Timestamp: wire.TimestampEarliest})
		mustOK(t, resp)
		return resp.Body.(*wire.ListOffsetsResponse).Offset
	}
	deleted := func() int {
		files, _ := filepath.Glob(filepath.Join(dir, "reap", "0", "*.deleted"))
		return len(files)
	}
	// produceRead produces one batch and reads it back at its offset: the read runs on
	// the partition's shard.
	n := 0
	produceRead := func() int64 {
		t.Helper()
		prefix := fmt.Sprintf("r%04d", n)
		n++
		pr := produceWaitBatch(t, w, "reap", records(0, -1, prefix, 40))
		resp := w.call(&wire.FetchRequest{Topic: []byte("reap"), Offset: pr.BaseOffset, MaxBytes: 1 << 20})
		mustOK(t, resp)
		if recs := resp.Body.(*wire.FetchResponse).Records; !strings.Contains(string(recs), prefix+"-0") {
			t.Fatalf("the fetch at %d did not return its batch %s", pr.BaseOffset, prefix)
		}
		return pr.LastOffset
	}

	// Produce until retention deleted a segment and its removal hangs. last is the last
	// offset produced, whichever loop produced it.
	var last int64
	for deadline := time.Now().Add(30 * time.Second); !closed(h.first); {
		if time.Now().After(deadline) {
			t.Fatal("no removal reached the filesystem in 30 s of retention")
		}
		last = produceRead()
	}
	hungAt := earliest()

	// The reaper is stuck: the partition serves and retention goes on.
	for deadline := time.Now().Add(30 * time.Second); earliest() <= hungAt || deleted() < 4; {
		last = produceRead()
		if time.Now().After(deadline) {
			t.Fatalf("with the reaper stuck: log start %d (%d when it stuck), %d *.deleted files", earliest(), hungAt, deleted())
		}
	}
	if h.held.Load() != 1 {
		t.Fatalf("%d removals held at once, want the reaper's one", h.held.Load())
	}

	// The filesystem answers: the pile goes, and what the log keeps reads back whole.
	free()
	for deadline := time.Now().Add(30 * time.Second); deleted() > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d *.deleted files left 30 s after the filesystem answered", deleted())
		}
	}
	start := earliest()
	if got := fetchValues(t, w, "reap", 0, start); int64(len(got)) != last+1-start {
		t.Fatalf("read %d records from %d, want %d (to %d)", len(got), start, last+1-start, last)
	}
}

// closed reports whether ch is closed, without waiting.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
