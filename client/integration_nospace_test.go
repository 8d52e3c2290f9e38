package client_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"sluice/broker"
	"sluice/client"
	"sluice/memarena"
	"sluice/persist/local"
	"sluice/persist/vfs"
	"sluice/persist/vfs/errorfs"
)

// diskFull refuses to allocate segment files (create, fallocate) with ENOSPC while full
// is set: segment files are preallocated, so a full disk shows when a partition needs its
// next one. It stands in for a full disk: mounting a small tmpfs needs privileges that CI
// may not have.
type diskFull struct{ full atomic.Bool }

// MaybeError implements errorfs.Injector.
func (d *diskFull) MaybeError(op errorfs.Op, path string) error {
	if (op == errorfs.OpAllocate || op == errorfs.OpCreate) && strings.HasSuffix(path, ".log") && d.full.Load() {
		return syscall.ENOSPC
	}
	return nil
}

// startFullDiskBroker starts a broker in this process whose segment files go through
// errorfs with disk, and returns its address. It shuts down when the test ends.
func startFullDiskBroker(t *testing.T, disk *diskFull) string {
	t.Helper()
	cfg := broker.Config{DataDir: t.TempDir(), Arena: memarena.Config{Size: 64 << 20},
		Log: local.Options{FS: errorfs.Wrap(vfs.Default(), disk), SegmentBytes: local.MinSegmentBytes}}
	cfg.Net.Listen = "127.0.0.1:0"
	b, err := broker.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	return b.Addr()
}

// TestProducerReportsFullDisk: while the broker's disk is full it answers no_space; the
// producer keeps retrying, and ProduceSync, Flush and Close, giving up at their deadline,
// say that the disk is full (ErrBrokerNoSpace) as well as that the deadline passed. Once
// space is back the records held are persisted, each once. (Before, the broker answered
// not_serving and the caller saw only "context deadline exceeded".) Records are larger
// than the broker's 4 KiB segments, so each needs a segment file of its own: the first
// sent after the disk filled is taken into memory (acks=accepted), its file cannot be
// had, and from then on the partition refuses writes.
func TestProducerReportsFullDisk(t *testing.T) {
	disk := &diskFull{}
	addr := startFullDiskBroker(t, disk)
	createTopic(t, addr, "full", 1)
	p := newProducer(t, addr, "full", client.RetryBackoff(time.Millisecond, 50*time.Millisecond))
	gaveUp := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, client.ErrBrokerNoSpace) || !errors.Is(err, context.DeadlineExceeded) ||
			!strings.Contains(err.Error(), "disk is full") {
			t.Fatalf("%s on a full disk: %v", what, err)
		}
	}
	short := func() context.Context { return ctxFor(t, 100*time.Millisecond) }
	next := uint64(0)
	// fill produces records larger than a segment until one is refused: the first after
	// the disk filled is taken into memory, and once the persister found no room for its
	// file the partition refuses. It returns Flush's error, which must carry the cause.
	fill := func() error {
		t.Helper()
		var err error
		waitUntil(t, func() bool {
			if err := p.Produce(ctxFor(t, time.Second), &client.Record{Value: value(next, 2*local.MinSegmentBytes)}); err != nil {
				t.Fatal(err)
			}
			next++
			err = p.Flush(short())
			return errors.Is(err, client.ErrBrokerNoSpace)
		})
		return err
	}
	disk.full.Store(true)
	gaveUp("Flush", fill())
	_, err := p.ProduceSync(short(), &client.Record{Value: value(next, 8)}, client.AckAccepted)
	next++
	gaveUp("ProduceSync", err)

	disk.full.Store(false) // space is back: the records held all along go in
	if err := p.WaitPersisted(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("after space came back: %v", err)
	}
	got := consumeAll(t, addr, "full", int(next))
	if uint64(len(got)) != next {
		t.Fatalf("read %d records, want %d", len(got), next)
	}
	for i, r := range got {
		if r.id != uint64(i) {
			t.Fatalf("record %d is %d: want each once, in order", i, r.id)
		}
	}

	disk.full.Store(true)
	before := next
	_ = fill()
	err = p.Close(short())
	var ue *client.UnpersistedError
	if !errors.As(err, &ue) || uint64(len(ue.Records)) != next-before {
		t.Fatalf("Close on a full disk: %v, want %d records not persisted", err, next-before)
	}
	gaveUp("Close", err)
}
