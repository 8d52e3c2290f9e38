package test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sluice/broker"
	"sluice/persist/local"
	"sluice/persist/vfs"
	"sluice/persist/vfs/errorfs"
	"sluice/sched"
	"sluice/wire"
)

// The tests in this file run the broker in the test process, over an errorfs filesystem:
// a real disk cannot be made to hold an fsync, or to fill up, on cue (the one fake the
// project allows, and only for faults; mounting a small tmpfs needs privileges CI may not
// have). Everything else — the network, the shards, the segment files — is real.

// holdSync is an errorfs injector that, once armed, holds every fsync of a segment file
// until released, and reports that one is held.
type holdSync struct {
	mu       sync.Mutex
	armed    bool
	held     chan struct{} // closed when an fsync is first held
	release  chan struct{} // closed to let the fsyncs go
	heldOnce sync.Once
	letOnce  sync.Once
}

// letGo releases the held fsyncs (once; also in the test's cleanup, so that a failing
// test does not leave the broker's shutdown waiting for them).
func (h *holdSync) letGo() { h.letOnce.Do(func() { close(h.release) }) }

func newHoldSync() *holdSync {
	return &holdSync{held: make(chan struct{}), release: make(chan struct{})}
}

func (h *holdSync) MaybeError(op errorfs.Op, path string) error {
	h.mu.Lock()
	armed := h.armed
	h.mu.Unlock()
	if armed && op == errorfs.OpSync && strings.HasSuffix(path, ".log") {
		h.heldOnce.Do(func() { close(h.held) })
		<-h.release
	}
	return nil
}

func (h *holdSync) arm() {
	h.mu.Lock()
	h.armed = true
	h.mu.Unlock()
}

// startInProcess starts a broker in this process over fs, with a small shard queue, and
// returns it with a buffer holding its log.
func startInProcess(t *testing.T, fs vfs.FS, segmentBytes int64) (*broker.Broker, *syncBuf) {
	t.Helper()
	return startInProcessAt(t, t.TempDir(), fs, segmentBytes)
}

// startInProcessAt is startInProcess on the data directory dir; each of more changes the
// configuration before the broker starts.
func startInProcessAt(t *testing.T, dir string, fs vfs.FS, segmentBytes int64, more ...func(*broker.Config)) (*broker.Broker, *syncBuf) {
	t.Helper()
	logs := &syncBuf{}
	cfg := broker.Config{DataDir: dir,
		Log:    local.Options{FS: fs, Sync: local.SyncGroup, SegmentBytes: segmentBytes},
		Sched:  sched.Config{Shards: 1, QueueLen: 8},
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	cfg.Net.Listen = "127.0.0.1:0"
	cfg.Arena.Size = 64 << 20
	for _, f := range more {
		f(&cfg)
	}
	b, err := broker.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b.Shutdown(ctx)
	})
	return b, logs
}

// withMetrics serves the broker's metrics on a loopback port (Broker.MetricsAddr).
func withMetrics(c *broker.Config) { c.Metrics.Listen = "127.0.0.1:0" }

// syncBuf is a buffer for a logger shared with the broker's goroutines.
type syncBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// TestLoopsNeverWaitForTheDisk holds every fsync of a partition's segment files and shows
// that produce, describe, metadata and fetch answers still come back while the disk holds
// them: appends go to memory (the persister writes later, off the loops and the shards),
// and nothing an event loop or a shard calls waits for a lock held across a write, an
// fsync or a roll. Once the arena is full of data not yet durable, produces are answered
// busy, with the window — from the loop. (Were any of this waiting for the disk, the calls
// below would hang until the release, and fail their read deadline.)
func TestLoopsNeverWaitForTheDisk(t *testing.T) {
	h := newHoldSync()
	b, _ := startInProcess(t, errorfs.Wrap(vfs.Default(), h), 64<<10)
	t.Cleanup(h.letGo) // runs before the broker's shutdown
	w := dial(t, b.Addr())
	createTopic(t, w, "d", 1)
	value := strings.Repeat("v", 1000)
	mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("d"), Version: 1, Batches: records(0, -1, value, 8)}))

	h.arm()
	// The persister's next fsync now blocks. Appends go on into memory, across segment
	// rolls, until the arena (64 MiB) is full of data that is not durable: busy.
	busy, accepted := 0, 1
	for i := 0; busy == 0 && i < 4000; i++ {
		r := w.call(&wire.ProduceRequest{Topic: []byte("d"), Version: 1, Batches: records(0, -1, value, 60)})
		switch r.Header.Code {
		case wire.CodeNone:
			accepted++
		case wire.CodeBusy:
			busy++
			if pr := r.Body.(*wire.ProduceResponse); pr.Session == 0 || pr.RetryAfterMs == 0 {
				t.Fatalf("busy answer without the window: %+v", pr)
			}
		default:
			t.Fatalf("produce while the disk is held: %v %q", r.Header.Code, r.Text)
		}
	}
	<-h.held
	if busy == 0 {
		t.Fatalf("no busy answer after %d accepted produces with the disk held", accepted)
	}
	other := dial(t, b.Addr())
	desc := other.call(&wire.DescribeTopicRequest{Name: "d"})
	mustOK(t, desc)
	if p := desc.Body.(*wire.DescribeTopicResponse).Partitions[0]; p.NextOffset < int64(8+60*(accepted-1)) || p.Session == 0 {
		t.Fatalf("describe while the disk is held: %+v", p)
	}
	mustOK(t, other.call(&wire.MetadataRequest{}))
	// The shard serves a fetch of what is in memory.
	f := other.call(&wire.FetchRequest{Topic: []byte("d"), Offset: 8, MaxBytes: 1 << 20})
	mustOK(t, f)
	if len(f.Body.(*wire.FetchResponse).Records) == 0 {
		t.Fatal("fetch while the disk is held returned nothing")
	}
	select {
	case <-h.release:
		t.Fatal("BUG: the fsyncs were released early")
	default: // every answer above came while the disk held the fsyncs
	}
	h.letGo()
	// Once the disk lets go, the checkpoint catches up and everything accepted is there.
	want := int64(8 + 60*(accepted-1))
	deadline := time.Now().Add(30 * time.Second)
	for {
		d := other.call(&wire.DescribeTopicRequest{Name: "d"})
		mustOK(t, d)
		if d.Body.(*wire.DescribeTopicResponse).Partitions[0].Checkpoint >= want-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the checkpoint did not catch up after the release")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := fetchValues(t, other, "d", 0, 0); int64(len(got)) != want {
		t.Fatalf("read %d records after the release, want %d", len(got), want)
	}
}

// fullDisk is an errorfs injector that refuses to allocate (create or fallocate) segment
// files with ENOSPC while full. Segment files are preallocated, so on a full disk it is
// the next segment's file that cannot be had; the active one's space is reserved.
type fullDisk struct {
	mu   sync.Mutex
	full bool
}

func (f *fullDisk) MaybeError(op errorfs.Op, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.full && (op == errorfs.OpAllocate || op == errorfs.OpCreate) {
		return syscall.ENOSPC
	}
	return nil
}

func (f *fullDisk) set(full bool) {
	f.mu.Lock()
	f.full = full
	f.mu.Unlock()
}

// TestDiskFull: a full disk is answered with its own code (not a timeout), with the
// partition's window and nothing appended, once the partition needs a new segment file
// it cannot get; it is logged once per partition, shown in /metrics, and the partition
// takes writes again once space is back. Everything accepted before is kept. A topic
// created while the disk is full is refused with the same code and leaves nothing behind.
func TestDiskFull(t *testing.T) {
	disk := &fullDisk{}
	b, logs := startInProcessAt(t, t.TempDir(), errorfs.Wrap(vfs.Default(), disk), 64<<10, withMetrics)
	metrics := b.MetricsAddr()
	w := dial(t, b.Addr())
	createTopic(t, w, "f", 1)
	mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("f"), Version: 1, Batches: records(0, -1, "a", 1)}))
	disk.set(true)
	value := strings.Repeat("v", 1000)
	accepted, refused := 1, 0
	deadline := time.Now().Add(30 * time.Second)
	for refused < 3 {
		r := w.call(&wire.ProduceRequest{Topic: []byte("f"), Version: 1, Batches: records(0, -1, value, 10)})
		switch r.Header.Code {
		case wire.CodeNone: // the active segment's space is reserved: taken
			accepted += 10
		case wire.CodeNoSpace:
			refused++
			if !r.Header.Code.Retriable() {
				t.Fatal("no_space is not retriable")
			}
			if pr := r.Body.(*wire.ProduceResponse); pr.BaseOffset != -1 || pr.Session == 0 {
				t.Fatalf("no_space answer %+v", pr)
			}
		default:
			t.Fatalf("produce on a full disk answered %v %q", r.Header.Code, r.Text)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no no_space answer after %d records accepted on a full disk", accepted)
		}
	}
	waitMetric(t, metrics, `sluice_partition_state{partition="0",state="no_space",topic="f"}`, 1)
	if n := strings.Count(logs.String(), "disk full"); n != 1 {
		t.Fatalf("disk full logged %d times, want once:\n%s", n, logs.String())
	}
	r := w.call(&wire.CreateTopicRequest{Name: "g", Partitions: 2})
	if r.Header.Code != wire.CodeNoSpace {
		t.Fatalf("create on a full disk answered %v %q", r.Header.Code, r.Text)
	}
	if d := w.call(&wire.DescribeTopicRequest{Name: "g"}); d.Header.Code != wire.CodeUnknownTopic {
		t.Fatalf("a refused creation left a topic: %v", d.Header.Code)
	}
	disk.set(false)
	// The persister gets its file at its next pass; then writes are taken again.
	for {
		r := w.call(&wire.ProduceRequest{Topic: []byte("f"), Version: 1, Batches: records(0, -1, "c", 1)})
		if r.Header.Code == wire.CodeNone {
			break
		}
		if r.Header.Code != wire.CodeNoSpace || time.Now().After(deadline.Add(30*time.Second)) {
			t.Fatalf("after space came back: %v %q", r.Header.Code, r.Text)
		}
		time.Sleep(5 * time.Millisecond)
	}
	got := fetchValues(t, w, "f", 0, 0)
	if len(got) != accepted+1 || got[0] != "a-0" || got[len(got)-1] != "c-0" {
		t.Fatalf("after the disk filled and emptied: %d records (want %d), first %q last %q",
			len(got), accepted+1, got[0], got[len(got)-1])
	}
	if scrape(t, metrics, `sluice_partition_state{partition="0",state="no_space",topic="f"}`) == 1 {
		t.Fatal("the partition still reports a full disk")
	}
	mustOK(t, w.call(&wire.CreateTopicRequest{Name: "g", Partitions: 2}))
}
