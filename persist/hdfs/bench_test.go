package hdfs

import (
	"context"
	"fmt"
	"path"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"

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
	end, err := writeReadFile(ctx, conn, dir, 32e6)
	if err != nil {
		b.Fatal(err)
	}
	arena, err := memarena.New(memarena.Config{Size: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer arena.Close()
	buf := make([]byte, rawIO)
	var viaReader, raw Rate
	b.ResetTimer()
	for range b.N {
		rd, rw, err := readPass(ctx, conn, dir, end, arena, buf)
		if err != nil {
			b.Fatal(err)
		}
		viaReader.Bytes, viaReader.Seconds = viaReader.Bytes+rd.Bytes, viaReader.Seconds+rd.Seconds
		raw.Bytes, raw.Seconds = raw.Bytes+rw.Bytes, raw.Seconds+rw.Seconds
	}
	b.StopTimer()
	b.ReportMetric(viaReader.MBPerSec(), "reader-MB/s")
	b.ReportMetric(raw.MBPerSec(), "raw-MB/s")
	b.ReportMetric(raw.Seconds/viaReader.Seconds, "reader/raw")
}
