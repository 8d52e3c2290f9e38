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

// TestProduceSaysDiskFull: `sluice produce` to a broker whose disk is full (a broker in
// this process, its segment files behind errorfs) exits 1 at its --timeout and says that
// the disk is full, for either level of acknowledgement, not just "context deadline
// exceeded". (The --timeout leaves the broker's first no_space answer ample time.)
func TestProduceSaysDiskFull(t *testing.T) {
	disk := &diskFull{}
	cfg := broker.Config{DataDir: t.TempDir(), Arena: memarena.Config{Size: 64 << 20},
		Log: local.Options{FS: errorfs.Wrap(vfs.Default(), disk)}}
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
	for _, acks := range []string{"accepted", "persisted"} {
		code, _, errOut := sluiceCmd(t, "a\nb\n", "produce", "--broker", b.Addr(), "--topic", "full", "--acks", acks, "--timeout", "3s")
		if code != 1 || !strings.Contains(errOut, "the broker's disk is full") || strings.Contains(errOut, "context deadline exceeded") {
			t.Fatalf("produce --acks %s to a full disk: exit %d\n%s", acks, code, errOut)
		}
	}
}
