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
	logs := &syncBuf{}
	cfg := broker.Config{DataDir: t.TempDir(),
		Log:    local.Options{FS: fs, Sync: local.SyncGroup, SegmentBytes: segmentBytes},
		Sched:  sched.Config{Shards: 1, QueueLen: 8},
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	cfg.Net.Listen = "127.0.0.1:0"
	cfg.Arena.Size = 64 << 20
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

// TestLoopsNeverWaitForTheDisk holds the fsyncs of a partition (the persister's, then the
// one of a segment roll, which stops the partition's shard) and shows that describe,
// metadata and busy answers still come back while the disk holds them: nothing an event
// loop calls waits for a lock held across an fsync, an index write or a roll. (Were it
// otherwise the calls below would hang until the release, and fail their read deadline.)
func TestLoopsNeverWaitForTheDisk(t *testing.T) {
	h := newHoldSync()
	b, _ := startInProcess(t, errorfs.Wrap(vfs.Default(), h), 64<<10)
	t.Cleanup(h.letGo) // runs before the broker's shutdown
	w := dial(t, b.Addr())
	createTopic(t, w, "d", 1)
	value := strings.Repeat("v", 1000)
	mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("d"), Version: 1, Batches: records(0, -1, value, 8)}))

	h.arm()
	// The persister's group fsync now blocks; enough data then makes the shard roll the
	// segment, whose fsync waits behind it: the shard is stuck on the disk.
	for range 8 {
		w.send(&wire.ProduceRequest{Topic: []byte("d"), Version: 1, Batches: records(0, -1, value, 8)})
	}
	<-h.held
	// Flood the stuck shard until its queue (8) is full, one request per connection (a
	// connection's answers keep request order): the overflow is answered busy by the
	// event loop, reading the partition's window without a lock.
	var flood []*wireConn
	for range 24 {
		c := dial(t, b.Addr())
		c.send(&wire.ProduceRequest{Topic: []byte("d"), Version: 1, Batches: records(0, -1, "x", 1)})
		flood = append(flood, c)
	}
	other := dial(t, b.Addr())
	desc := other.call(&wire.DescribeTopicRequest{Name: "d"})
	mustOK(t, desc)
	if p := desc.Body.(*wire.DescribeTopicResponse).Partitions[0]; p.NextOffset < 8 || p.Session == 0 {
		t.Fatalf("describe while the disk is held: %+v", p)
	}
	mustOK(t, other.call(&wire.MetadataRequest{}))
	// The last connection's request found the queue full: it is answered now.
	r := flood[len(flood)-1].recv()
	if r.Header.Code != wire.CodeBusy {
		t.Fatalf("the overflow of a stuck shard answered %v %q, want busy", r.Header.Code, r.Text)
	}
	if pr := r.Body.(*wire.ProduceResponse); pr.Session == 0 || pr.RetryAfterMs == 0 {
		t.Fatalf("busy answer without the window: %+v", pr)
	}
	select {
	case <-h.release:
		t.Fatal("BUG: the fsyncs were released early")
	default: // every answer above came while the disk held the fsyncs
	}
	h.letGo()
	// Everything held completes once the disk lets go.
	for range 8 {
		mustOK(t, w.recv())
	}
	if got := fetchValues(t, other, "d", 0, 0); len(got) < 9*8 {
		t.Fatalf("read %d records after the release, want at least %d", len(got), 9*8)
	}
}

// fullDisk is an errorfs injector that fails segment writes with ENOSPC while full.
type fullDisk struct {
	mu   sync.Mutex
	full bool
}

func (f *fullDisk) MaybeError(op errorfs.Op, path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.full && (op == errorfs.OpWrite || op == errorfs.OpCreate) {
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
// partition's window and nothing appended; it is logged once per partition, shown in
// /metrics, and the partition takes writes again once space is back. A topic created
// while the disk is full is refused with the same code and leaves nothing behind.
func TestDiskFull(t *testing.T) {
	disk := &fullDisk{}
	b, logs := startInProcess(t, errorfs.Wrap(vfs.Default(), disk), 1<<20)
	metrics, err := b.ServeMetrics("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	w := dial(t, b.Addr())
	createTopic(t, w, "f", 1)
	mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("f"), Version: 1, Batches: records(0, -1, "a", 1)}))
	disk.set(true)
	for range 5 {
		r := w.call(&wire.ProduceRequest{Topic: []byte("f"), Version: 1, Batches: records(0, -1, "b", 1)})
		if r.Header.Code != wire.CodeNoSpace || !r.Header.Code.Retriable() {
			t.Fatalf("produce on a full disk answered %v %q", r.Header.Code, r.Text)
		}
		if pr := r.Body.(*wire.ProduceResponse); pr.BaseOffset != -1 || pr.Session == 0 {
			t.Fatalf("no_space answer %+v", pr)
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
	mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("f"), Version: 1, Batches: records(0, -1, "c", 1)}))
	if got := fetchValues(t, w, "f", 0, 0); strings.Join(got, ",") != "a-0,c-0" {
		t.Fatalf("after the disk filled and emptied: %v", got)
	}
	if scrape(t, metrics, `sluice_partition_state{partition="0",state="no_space",topic="f"}`) == 1 {
		t.Fatal("the partition still reports a full disk")
	}
	mustOK(t, w.call(&wire.CreateTopicRequest{Name: "g", Partitions: 2}))
}
