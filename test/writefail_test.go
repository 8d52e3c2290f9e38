package test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"sluice/persist/vfs"
	"sluice/persist/vfs/errorfs"
	"sluice/wire"
)

// failWrites is an errorfs injector that, once armed, fails every write to a segment
// file with EIO: a disk that went bad under the persister's O_DIRECT writes (a real disk
// cannot be made to fail on cue; this is the fault-injection fake the project allows).
type failWrites struct{ armed atomic.Bool }

func (f *failWrites) MaybeError(op errorfs.Op, path string) error {
	if f.armed.Load() && op == errorfs.OpWrite && strings.HasSuffix(path, ".log") {
		return syscall.EIO
	}
	return nil
}

// TestWriteErrorStopsThePartition: when the persister's write of a segment fails, the
// write is not retried over the same data: the partition takes no more writes (producers
// get not_serving, a retriable code, with a text that says why), its checkpoint stops,
// /metrics shows it failed, and the broker logs it. Nothing acknowledged as durable is
// lost: after a restart on a healthy disk every such record is there, in order.
func TestWriteErrorStopsThePartition(t *testing.T) {
	dir := t.TempDir()
	disk := &failWrites{}
	b, logs := startInProcessAt(t, dir, errorfs.Wrap(vfs.Default(), disk), 1<<20, withMetrics)
	metrics := b.MetricsAddr()
	w := dial(t, b.Addr())
	createTopic(t, w, "e", 1)
	value := strings.Repeat("d", 700)
	var durable []string // values acknowledged as durable, in order
	for i := range 40 {
		prefix := fmt.Sprintf("%s%03d", value, i)
		r := w.call(&wire.ProduceRequest{Topic: []byte("e"), Version: 1, WaitDurableMs: 10_000, Batches: records(0, -1, prefix, 5)})
		mustOK(t, r)
		if pr := r.Body.(*wire.ProduceResponse); pr.Checkpoint < pr.BaseOffset+4 {
			t.Fatalf("acks=persisted answered with C %d below the batch [%d, %d]", pr.Checkpoint, pr.BaseOffset, pr.BaseOffset+4)
		}
		for j := range 5 {
			durable = append(durable, fmt.Sprintf("%s-%d", prefix, j))
		}
	}
	disk.armed.Store(true)

	// Produce until the persister has met the failure: appends are taken until then.
	var failed *wire.Response
	var checkpoint int64 = -2
	for deadline := time.Now().Add(30 * time.Second); failed == nil; {
		r := w.call(&wire.ProduceRequest{Topic: []byte("e"), Version: 1, Batches: records(0, -1, value, 5)})
		switch r.Header.Code {
		case wire.CodeNone:
			checkpoint = r.Body.(*wire.ProduceResponse).Checkpoint
		case wire.CodeNotServing:
			failed = r
		default:
			t.Fatalf("produce after the disk failed: %v %q", r.Header.Code, r.Text)
		}
		if time.Now().After(deadline) {
			t.Fatal("the partition still takes writes 30 s after its segment writes began to fail")
		}
	}
	if !failed.Header.Code.Retriable() || !strings.Contains(failed.Text, "fail") {
		t.Fatalf("the refusal: %v %q", failed.Header.Code, failed.Text)
	}
	waitMetric(t, metrics, `sluice_partition_state{partition="0",state="failed",topic="e"}`, 1)
	if !strings.Contains(logs.String(), "write or fsync failed") {
		t.Fatalf("the failure is not logged:\n%s", logs.String())
	}
	// C stopped: a produce waiting for durability is answered at the end of its wait
	// with a C below it (or refused), never acknowledged.
	r := w.call(&wire.ProduceRequest{Topic: []byte("e"), Version: 1, WaitDurableMs: 300, Batches: records(0, -1, value, 1)})
	if r.Header.Code == wire.CodeNone {
		if pr := r.Body.(*wire.ProduceResponse); pr.BaseOffset >= 0 && pr.Checkpoint >= pr.BaseOffset {
			t.Fatalf("a produce was acknowledged durable on a failed partition: %+v", pr)
		}
	}
	t.Logf("last C seen before the failure: %d; %d records acknowledged durable", checkpoint, len(durable))

	// Restart on a healthy disk: everything acknowledged durable is there.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if err := b.Shutdown(ctx); err != nil {
		t.Logf("shutdown of the failed broker: %v", err)
	}
	t.Logf("shutdown of the failed broker took %v", time.Since(start))
	b2, _ := startInProcessAt(t, dir, vfs.Default(), 1<<20)
	w2 := dial(t, b2.Addr())
	got := fetchValues(t, w2, "e", 0, 0)
	if len(got) < len(durable) {
		t.Fatalf("after the restart %d records, want at least the %d acknowledged durable", len(got), len(durable))
	}
	for i, v := range durable {
		if got[i] != v {
			t.Fatalf("record %d after the restart is %.20q..., want %.20q...", i, got[i], v)
		}
	}
}
