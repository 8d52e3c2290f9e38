package local

import (
	"errors"
	"os"
	"strings"
	"testing"

	"sluice/persist/vfs"
	"sluice/persist/vfs/errorfs"
)

// removeHook runs a function when the .log of a segment is about to be removed: it
// removes the file itself first, then calls fn, so that fn sees the moment after the
// file is gone. A fake because only it can stop retention between two of its steps.
type removeHook struct{ fn func(path string) }

func (h *removeHook) MaybeError(op errorfs.Op, path string) error {
	if op == errorfs.OpRemove && strings.HasSuffix(path, logSuffix) && h.fn != nil {
		os.Remove(path)
		h.fn(path)
	}
	return nil
}

// TestReadRacingDelete: a reader that took a segment from the log before retention
// deleted it, and opens it (its descriptor closed by the file pool) just after its file
// is removed, finds it gone (offset out of range for the reader), not a missing file (a
// storage error). Before the fix the file went first and the segment was marked dropped
// after.
func TestReadRacingDelete(t *testing.T) {
	hook := &removeHook{}
	dir := t.TempDir()
	opts := Options{SegmentBytes: 4 << 10, Sync: SyncNever, RetentionBytes: 4 << 10,
		FS: errorfs.Wrap(vfs.Default(), hook), ReuseSegments: -1} // the files are removed
	buildLog(t, dir, opts, 300)
	l := openLog(t, dir, opts)
	l.mu.Lock()
	victim := l.mu.segs[0]
	l.mu.Unlock()
	var got error
	hook.fn = func(path string) {
		if path != victim.path || got != nil {
			return
		}
		// The pool closes its descriptor (as an eviction would), then the reader opens.
		if h := victim.h.Swap(nil); h != nil {
			if p := h.pool.Load(); p != nil {
				p.remove(h)
			}
			h.release()
		}
		h, err := victim.use()
		if err == nil {
			h.release()
			err = errors.New("opened a removed file")
		}
		got = err
	}
	if _, err := l.ApplyRetention(l.Durable()); err != nil {
		t.Fatal(err)
	}
	if got == nil {
		t.Fatal("retention did not delete the first segment")
	}
	if !errors.Is(got, errSegmentGone) {
		t.Fatalf("a reader opening the deleted segment got %v, want errSegmentGone", got)
	}
}
