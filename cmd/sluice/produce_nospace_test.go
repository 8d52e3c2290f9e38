package main

import (
	"context"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"sluice/broker"
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

// TestProduceSaysDiskFull: `sluice produce` to a broker whose disk is full (a broker in
// this process, its segment files behind errorfs) exits 1 at its --timeout and says that
// the disk is full, for either level of acknowledgement, not just "context deadline
// exceeded". (The --timeout leaves the broker's first no_space answer ample time.) A
// record larger than a segment (4 KiB here) needs a segment file of its own: the first
// one sent after the disk filled is taken into memory, its file cannot be had, and from
// then on the partition refuses writes with no_space.
func TestProduceSaysDiskFull(t *testing.T) {
	disk := &diskFull{}
	cfg := broker.Config{DataDir: t.TempDir(), Arena: memarena.Config{Size: 64 << 20},
		Log: local.Options{FS: errorfs.Wrap(vfs.Default(), disk), SegmentBytes: local.MinSegmentBytes}}
	cfg.Net.Listen = "127.0.0.1:0"
	b, err := broker.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b.Shutdown(ctx)
	}()
	mustRun(t, 0, "", "topic", "create", "full", "--broker", b.Addr())
	disk.full.Store(true)
	big := strings.Repeat("x", 2*local.MinSegmentBytes) + "\n"
	deadline := time.Now().Add(30 * time.Second)
	for code := 0; code == 0; { // until the persister found no room and refusals began
		if time.Now().After(deadline) {
			t.Fatal("the broker never refused a produce on a full disk")
		}
		code, _, _ = sluiceCmd(t, big, "produce", "--broker", b.Addr(), "--topic", "full", "--timeout", "1s")
	}
	for _, acks := range []string{"accepted", "persisted"} {
		code, _, errOut := sluiceCmd(t, "a\nb\n", "produce", "--broker", b.Addr(), "--topic", "full", "--acks", acks, "--timeout", "3s")
		if code != 1 || !strings.Contains(errOut, "the broker's disk is full") || strings.Contains(errOut, "context deadline exceeded") {
			t.Fatalf("produce --acks %s to a full disk: exit %d\n%s", acks, code, errOut)
		}
	}
}
