package local

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"sluice/batch"
	"sluice/persist/vfs"
	"sluice/persist/vfs/errorfs"
)

// Batches in these tests are deterministic functions of their base offset, so any log
// can be checked against "what was appended" without remembering it: the batch at offset
// o has countAt(o) records, record i has value valueAt(o+i) and timestamp tsAt(o+i).
func countAt(o int64) int { return 1 + int(o%5) }
func tsAt(o int64) int64  { return 1_700_000_000_000 + o*10 }
func valueAt(o int64) []byte {
	return fmt.Appendf(nil, "value-%d-%s", o, bytes.Repeat([]byte{'x'}, int(o%37)))
}
func keyAt(o int64) []byte     { return fmt.Appendf(nil, "k%d", o%11) }
func logicalAt(o int64) uint16 { return uint16(o * 7919) }

// makeBatch builds the batch that belongs at offset o (its base offset field left 0).
func makeBatch(o int64) []byte {
	var b batch.Builder
	b.Reset(nil, 0, -1)
	for i := range int64(countAt(o)) {
		b.Add(logicalAt(o+i), tsAt(o+i), keyAt(o+i), valueAt(o+i))
	}
	return b.Finish()
}

// appendN places n deterministic batches, persisting after each one, and returns the
// next offset. It needs nothing pending (a fresh MemSource holds only what it places:
// the log keeps the partial block the earlier bytes ended in).
func appendN(t testing.TB, l *Log, n int) int64 {
	t.Helper()
	src := NewMemSource()
	for range n {
		placeN(t, l, src, 1)
		persistAll(t, l, src)
	}
	return l.Next()
}

// placeN places n deterministic batches into src without persisting them, and returns
// the next offset.
func placeN(t testing.TB, l *Log, src *MemSource, n int) int64 {
	t.Helper()
	next := l.Next()
	for range n {
		p, err := src.Append(l, makeBatch(next), l.opts.Clock())
		if err != nil {
			t.Fatalf("place at %d: %v", next, err)
		}
		if p.Base != next {
			t.Fatalf("placed at %d, want %d", p.Base, next)
		}
		next += int64(countAt(next))
	}
	return next
}

// persistAll persists what is placed and checks that everything placed is now written
// and durable (under every policy: SyncNever counts the write).
func persistAll(t testing.TB, l *Log, src *MemSource) {
	t.Helper()
	if _, err := l.Persist(src); err != nil {
		t.Fatalf("persist: %v", err)
	}
	if l.Written() != l.Next() || l.Durable() != l.Next()-1 || l.Pending() != 0 {
		t.Fatalf("after persist: next %d written %d durable %d pending %d", l.Next(), l.Written(), l.Durable(), l.Pending())
	}
}

// checkContents reads the whole log and checks that it holds exactly the deterministic
// batches for [Start, Written), whole, in order, with valid CRCs.
func checkContents(t testing.TB, l *Log) {
	t.Helper()
	off, end := l.Start(), l.Written()
	var buf []byte
	for off < end {
		var next int64
		var err error
		buf, next, err = l.Read(buf[:0], off, 1<<16)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		for rest := buf; len(rest) > 0; {
			h, err := batch.Check(rest)
			if err != nil {
				t.Fatalf("read at %d: bad batch: %v", off, err)
			}
			checkBatch(t, rest[:h.Size()], off)
			off = h.LastOffset() + 1
			rest = rest[h.Size():]
		}
		if off != next {
			t.Fatalf("region ended at %d, batches at %d", next, off)
		}
	}
}

// checkBatch checks that b is the deterministic batch for offset o.
func checkBatch(t testing.TB, b []byte, o int64) {
	t.Helper()
	var it batch.Iter
	if err := it.Reset(b); err != nil {
		t.Fatalf("batch at %d: %v", o, err)
	}
	if h := it.Header(); h.BaseOffset != o || int(h.Count) != countAt(o) {
		t.Fatalf("batch at %d: base %d count %d, want %d, %d", o, h.BaseOffset, h.Count, o, countAt(o))
	}
	for i := int64(0); it.Next(); i++ {
		r := it.Record()
		if !bytes.Equal(r.Value, valueAt(o+i)) || r.Timestamp != tsAt(o+i) || r.Logical != logicalAt(o+i) {
			t.Fatalf("record %d: got %q ts %d logical %d", o+i, r.Value, r.Timestamp, r.Logical)
		}
	}
	if err := it.Err(); err != nil {
		t.Fatalf("batch at %d: %v", o, err)
	}
}

// fakeClock is a settable clock for rolls, group fsync and retention.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time          { return c.now }
func (c *fakeClock) Advance(d time.Duration) { c.now = c.now.Add(d) }

func openLog(t testing.TB, dir string, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// stats returns l.Stats() and fails the test on an error.
func stats(t testing.TB, l *Log) Stats {
	t.Helper()
	s, err := l.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// activeSize returns the byte size of the log's active segment.
func activeSize(l *Log) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.activeLocked().size
}

// makeRecords builds a batch of n records for the offsets from o (base offset field 0):
// record o+i has the deterministic key, value, timestamp and logical id of o+i.
func makeRecords(o int64, n int) []byte {
	var b batch.Builder
	b.Reset(nil, 0, -1)
	for i := range int64(n) {
		b.Add(logicalAt(o+i), tsAt(o+i), keyAt(o+i), valueAt(o+i))
	}
	return b.Finish()
}

// logRecorder is a slog handler that keeps every record, for tests that check what the
// log reported.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec)
	return nil
}
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

// count returns how many records at level have a message containing substr.
func (r *logRecorder) count(level slog.Level, substr string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.records {
		if rec.Level == level && strings.Contains(rec.Message, substr) {
			n++
		}
	}
	return n
}

// logger returns a logger writing into r.
func (r *logRecorder) logger() *slog.Logger { return slog.New(r) }

// opRecorder is an errorfs.Injector that fails nothing and records every operation, for
// tests that check which files were read, synced or created.
type opRecorder struct {
	mu  sync.Mutex
	ops []recordedOp
}

type recordedOp struct {
	op   errorfs.Op
	path string
}

func (r *opRecorder) MaybeError(op errorfs.Op, path string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, recordedOp{op, path})
	return nil
}

// count returns how many operations op on paths ending with suffix were recorded.
func (r *opRecorder) count(op errorfs.Op, suffix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, o := range r.ops {
		if o.op == op && strings.HasSuffix(o.path, suffix) {
			n++
		}
	}
	return n
}

// paths returns the distinct paths of the recorded operations op.
func (r *opRecorder) paths(op errorfs.Op) map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[string]bool{}
	for _, o := range r.ops {
		if o.op == op {
			m[o.path] = true
		}
	}
	return m
}

// reset forgets what was recorded.
func (r *opRecorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = nil
}

// recordingFS returns the real filesystem with every operation recorded in r.
func recordingFS(r *opRecorder) vfs.FS { return errorfs.Wrap(vfs.Default(), r) }

// readRP reads dir's recovery point and fails the test if there is none.
func readRP(t testing.TB, dir string) RecoveryPoint {
	t.Helper()
	rp, err := ReadRecoveryPoint(nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	return rp
}
