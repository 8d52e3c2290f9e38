package broker

import (
	"context"
	"log/slog"
	"sync"

	"sluice/persist/vfs"
)

// reaper removes the files of the segments retention deleted (local.Options.Discard),
// off the shards. Retention runs on a partition's shard, which also serves the
// partition's reads and wakes its long polls; unlinking a segment of 64 MiB took about
// 20 ms on this project's ext4 (mounted with discard), and one pass can delete dozens.
// Held on the shard, those unlinks stopped a partition's consumer for over a second at
// 450 MB/s (persist/local's deleteSegments). So retention only renames the files, and
// the reaper's goroutine, running while it has files to remove, removes them.
type reaper struct {
	fs      vfs.FS
	logger  *slog.Logger
	mu      sync.Mutex
	paths   []string
	running bool
	wg      sync.WaitGroup
}

// discard queues paths for removal and starts the goroutine if none runs. Any
// goroutine; it never blocks on the filesystem.
func (r *reaper) discard(paths []string) {
	r.mu.Lock()
	r.paths = append(r.paths, paths...)
	start := !r.running
	if start {
		r.running = true
		r.wg.Add(1)
	}
	r.mu.Unlock()
	if start {
		go r.run()
	}
}

// run removes queued files until none is left. A file that cannot be removed stays as
// *.deleted, which the partition's next open removes.
func (r *reaper) run() {
	defer r.wg.Done()
	for {
		r.mu.Lock()
		paths := r.paths
		r.paths = nil
		if len(paths) == 0 {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		for _, p := range paths {
			if err := r.fs.Remove(p); err != nil && !vfs.IsNotExist(err) {
				r.logger.Warn("cannot remove a deleted segment's file; the partition's next open removes it",
					"file", p, "err", err)
			}
		}
	}
}

// wait waits until every file queued is removed, or ctx ends (what is left stays as
// *.deleted, which the partitions' next open removes). Once retention no longer runs
// (the shards closed): a discard after wait began could start a goroutine it does not
// see.
func (r *reaper) wait(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
