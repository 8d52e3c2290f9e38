package hdfs

import (
	"context"
	"errors"
	"os"
	"path"
	"testing"
	"time"

	"sluice/batch"
)

// partCache is a memCache that holds only the blocks below limit: reads past it go to
// HDFS, here a NameNode address that refuses connections (an HDFS error the real one
// cannot be made to give on cue at one block of one read).
type partCache struct {
	memCache
	limit int64
}

func (c partCache) Get(f uint64, blk int64, dst []byte) (int, bool) {
	if blk*memBlock >= c.limit {
		return 0, false
	}
	return c.memCache.Get(f, blk, dst)
}

// bigBatchAt is one batch at offset o with a record of n zero bytes.
func bigBatchAt(o int64, n int) []byte {
	var b batch.Builder
	b.Reset(nil, 0, -1)
	b.Add(0, 1_700_000_000_000+o, nil, make([]byte, n))
	out := b.Finish()
	batch.SetBaseOffset(out, o)
	return out
}

// TestEndIOErrorIsNotATornTail (from a review): two damaged batches, then an intact
// one that crosses into the file's second block. With every block readable End finds
// damage (ErrCorrupt); when that block cannot be read, End fails with the read's error.
// It used to take the failed read for a torn tail and answer an end below the intact
// batch, with no error, which the shipper and a load from HDFS would have taken for the
// end of the data.
func TestEndIOErrorIsNotATornTail(t *testing.T) {
	const base, dir = 1000, "/ioerr/topic/0"
	var data []byte
	o := int64(base)
	for ; len(data) < 900<<10; o++ {
		data = append(data, bigBatchAt(o, 100<<10)...)
	}
	x, y := len(data), len(data)+len(bigBatchAt(o, 100))
	data = append(data, bigBatchAt(o, 100)...)
	data = append(data, bigBatchAt(o+1, 100)...)
	data = append(data, bigBatchAt(o+2, 300<<10)...)
	data[x+batch.HeaderSize+20] ^= 0x40
	data[y+batch.HeaderSize+20] ^= 0x40
	name := fileName(base, 1)
	infos := []os.FileInfo{fakeInfo{name, int64(len(data))}}
	full := memCache{files: map[uint64][]byte{fileID(path.Join(dir, name)): data}}
	ctx := context.Background()
	r := NewReader(nil, dir, full)
	r.files = trusted(infos)
	if _, _, err := r.End(ctx); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("End, every block readable: %v, want ErrCorrupt", err)
	}
	conn, err := NewConn(Options{Addresses: []string{"127.0.0.1:1"}, User: "t", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r = NewReader(conn, dir, partCache{full, blockSize})
	r.files = trusted(infos)
	end, ok, err := r.End(ctx)
	if err == nil || errors.Is(err, ErrCorrupt) {
		t.Fatalf("End, the second block unreadable: %d, %v, %v; want the read's error (the intact batch is at %d)", end, ok, err, o+2)
	}
}
