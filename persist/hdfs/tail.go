package hdfs

import (
	"context"
	"fmt"

	"sluice/batch"
)

// Tail is what a partition loading from HDFS needs: where HDFS's data ends (the offset
// its next batch gets) and the headers of its last batches, oldest first, to rebuild the
// producers' sequences (so that a resend of a batch already on HDFS is recognized).
type Tail struct {
	Start, End int64 // first offset on HDFS and the offset after the last batch
	Headers    []batch.Header
	// Epoch is the newest writer epoch among the partition's files: a writer that takes
	// the partition over writes above it, so its files fence every earlier writer's.
	Epoch uint64
}

// ReadTail reads the tail of the partition in dir: the headers of the batches in at
// least the last horizon bytes (whole files, from the end). ok is false when HDFS holds
// nothing of the partition.
func ReadTail(ctx context.Context, conn *Conn, dir string, horizon int64) (Tail, bool, error) {
	r := NewReader(conn, dir, nil)
	if err := r.Refresh(ctx); err != nil {
		return Tail{}, false, err
	}
	end, ok, err := r.End(ctx)
	if err != nil || !ok {
		return Tail{}, false, err
	}
	t := Tail{End: end}
	t.Start, _ = r.Start()
	for _, f := range r.files {
		t.Epoch = max(t.Epoch, f.epoch)
	}
	from, size := len(r.files)-1, int64(0)
	for from > 0 && size < horizon {
		size += r.files[from].size
		from--
	}
	for o := max(r.files[from].base, t.Start); o < end; {
		b, next, err := r.Read(ctx, o, 1<<20)
		if err != nil {
			return Tail{}, false, fmt.Errorf("cannot read the tail of %s at %d: %w", dir, o, err)
		}
		for len(b) > 0 {
			h, err := batch.ParseHeader(b)
			if err != nil {
				return Tail{}, false, fmt.Errorf("%w: %s at %d: %v", ErrCorrupt, dir, o, err)
			}
			t.Headers = append(t.Headers, h)
			b = b[h.Size():]
		}
		o = next
	}
	return t, true, nil
}
