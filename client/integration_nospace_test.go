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

// diskFull fails every write to a segment file with ENOSPC while full is set. It stands
// in for a full disk: mounting a small tmpfs needs privileges that CI may not have.
type diskFull struct{ full atomic.Bool }

// MaybeError implements errorfs.Injector.
func (d *diskFull) MaybeError(op errorfs.Op, path string) error {
	if op == errorfs.OpWrite && strings.HasSuffix(path, ".log") && d.full.Load() {
		return syscall.ENOSPC
	}
	return nil
}

// startFullDiskBroker starts a broker in this process whose segment files go through
// errorfs with disk, and returns its address. It shuts down when the test ends.
func startFullDiskBroker(t *testing.T, disk *diskFull) string {
	t.Helper()
	cfg := broker.Config{DataDir: t.TempDir(), Arena: memarena.Config{Size: 64 << 20},
		Log: local.Options{FS: errorfs.Wrap(vfs.Default(), disk)}}
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
// not_serving and the caller saw only "context deadline exceeded".)
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
	// refused produces record id on the full disk and polls Flush with short deadlines
	// until one gives up with the cause: the broker's first no_space answer arrived. The
	// producer keeps that cause until a request succeeds, so the calls after it know it.
	refused := func(id uint64) {
		t.Helper()
		if err := p.Produce(ctxFor(t, time.Second), &client.Record{Value: value(id, 8)}); err != nil {
			t.Fatal(err)
		}
		var err error
		waitUntil(t, func() bool {
			err = p.Flush(short())
			return !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, client.ErrBrokerNoSpace)
		})
		gaveUp("Flush", err)
	}
	disk.full.Store(true)
	refused(0)
	_, err := p.ProduceSync(short(), &client.Record{Value: value(1, 8)}, client.AckAccepted)
	gaveUp("ProduceSync", err)

	disk.full.Store(false) // space is back: the records held all along go in
	if err := p.WaitPersisted(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatalf("after space came back: %v", err)
	}
	got := consumeAll(t, addr, "full", 2)
	if len(got) != 2 || got[0].id != 0 || got[1].id != 1 {
		t.Fatalf("read %+v, want records 0 and 1 once each", got)
	}

	disk.full.Store(true)
	refused(2)
	err = p.Close(short())
	var ue *client.UnpersistedError
	if !errors.As(err, &ue) || len(ue.Records) != 1 {
		t.Fatalf("Close on a full disk: %v, want 1 record not persisted", err)
	}
	gaveUp("Close", err)
}
