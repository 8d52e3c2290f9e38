package hdfs

import (
	"context"
	"fmt"
	"io"
	"path"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"

	"sluice/batch"
	"sluice/internal/peer/hdfstest"
	"sluice/memarena"
)

// BenchmarkShip alternates, in each iteration, one commit round of 16 MiB of batches
// (Writer.Commit: Append or Create, writes, Close; what the shipper does back to back
// while it catches up after an outage) with a raw colinmarc/hdfs write of the same
// bytes to a new file (Create, Write, Close), and reports both rates and their ratio.
//
//	go test -run '^$' -bench BenchmarkShip -benchtime 20x -count 3 ./persist/hdfs
func BenchmarkShip(b *testing.B) {
	conn := benchConn(b)
	ctx := context.Background()
	dir := fmt.Sprintf("/bench-ship-%d", time.Now().UnixNano())
	w := NewWriter(dir, 1, 0, WriterOptions{})
	var round []byte
	var ship, raw time.Duration
	var bytes int64
	b.ResetTimer()
	for i := range b.N {
		round = round[:0]
		for o := w.Next(); len(round) < 16<<20; o += 1000 { // 16 MiB of 1 MiB batches
			round = append(round, bigBatch(o, 1000)...)
		}
		t0 := time.Now()
		if err := w.Commit(ctx, conn, [][]byte{round}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		err := conn.do(ctx, "raw", func(cl *hdfs.Client) error {
			return writeWhole(cl, path.Join(dir, fmt.Sprintf("raw-%d", i)), round)
		})
		if err != nil {
			b.Fatal(err)
		}
		ship += t1.Sub(t0)
		raw += time.Since(t1)
		bytes += int64(len(round))
	}
	b.StopTimer()
	b.ReportMetric(float64(bytes)/1e6/ship.Seconds(), "ship-MB/s")
	b.ReportMetric(float64(bytes)/1e6/raw.Seconds(), "raw-MB/s")
	b.ReportMetric(raw.Seconds()/ship.Seconds(), "ship/raw")
}

// benchConn returns a connection to the shared cluster, closed when b ends.
func benchConn(b *testing.B) *Conn {
	c := hdfstest.Shared(b)
	conn, err := NewConn(Options{Addresses: []string{c.Addr}, User: "sluice", Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(conn.Close)
	return conn
}

// bigBatch builds a batch of n records of 1 KiB values at offset o, as a producer
// batching by size sends them.
func bigBatch(o int64, n int) []byte {
	var b batch.Builder
	b.Reset(nil, 0, -1)
	v := make([]byte, 1000)
	for i := range n {
		v[0] = byte(i)
		b.Add(0, 1_700_000_000_000, nil, v)
	}
	out := b.Finish()
	batch.SetBaseOffset(out, o)
	return out
}

// BenchmarkReadHDFS alternates a cold read of a 32 MiB file through a Reader (fresh
// reader and fresh arena block cache: 1 MiB reads, each cached in 64 KiB chunks, every
// batch CRC-checked) with a raw colinmarc/hdfs read of the same file in 1 MiB reads, and reports both
// rates and their ratio.
//
//	go test -run '^$' -bench BenchmarkReadHDFS -benchtime 10x -count 3 ./persist/hdfs
func BenchmarkReadHDFS(b *testing.B) {
	conn := benchConn(b)
	ctx := context.Background()
	dir := fmt.Sprintf("/bench-read-%d", time.Now().UnixNano())
	w := NewWriter(dir, 1, 0, WriterOptions{RollBytes: 1 << 40})
	for w.Next() < 32000 { // 32 MiB
		if err := w.Commit(ctx, conn, [][]byte{bigBatch(w.Next(), 1000)}); err != nil {
			b.Fatal(err)
		}
	}
	end := w.Next()
	var viaReader, rawT time.Duration
	var bytes int64
	buf := make([]byte, 1<<20)
	b.ResetTimer()
	arena, err := memarena.New(memarena.Config{Size: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer arena.Close()
	for range b.N {
		blocks, err := arena.NewBlockCache(0) // cold: a fresh cache each pass
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		r := NewReader(conn, dir, ArenaCache{Blocks: blocks, Size: int(arena.Stats().ChunkSize)})
		if err := r.Refresh(ctx); err != nil {
			b.Fatal(err)
		}
		n := int64(0)
		for o := int64(0); o < end; {
			data, next, err := r.Read(ctx, o, 1<<20)
			if err != nil {
				b.Fatal(err)
			}
			n += int64(len(data))
			o = next
		}
		t1 := time.Now()
		p := path.Join(dir, r.files[0].name)
		err = conn.do(ctx, "raw read", func(cl *hdfs.Client) error {
			fr, err := cl.Open(p)
			if err != nil {
				return err
			}
			defer fr.Close()
			for {
				if _, err := io.ReadFull(fr, buf); err != nil {
					if err == io.EOF || err == io.ErrUnexpectedEOF {
						return nil
					}
					return err
				}
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		blocks.Close()
		viaReader += t1.Sub(t0)
		rawT += time.Since(t1)
		bytes += n
	}
	b.StopTimer()
	b.ReportMetric(float64(bytes)/1e6/viaReader.Seconds(), "reader-MB/s")
	b.ReportMetric(float64(bytes)/1e6/rawT.Seconds(), "raw-MB/s")
	b.ReportMetric(rawT.Seconds()/viaReader.Seconds(), "reader/raw")
}
