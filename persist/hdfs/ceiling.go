package hdfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/colinmarc/hdfs/v2"

	"sluice/batch"
	"sluice/memarena"
)

// The ceilings the shipper and the reader are compared with (make bench-hdfs, and this
// package's benchmarks): colinmarc/hdfs writing and reading files raw, with none of this
// package's work (no batches, no CRC checks, no index, no cache). They live here because
// only this package may import colinmarc/hdfs.

// rawIO is the size of each raw write and read: the shipper's batches and the reader's
// blocks are 1 MiB at most too.
const rawIO = 1 << 20

// Rate is an amount of bytes moved and the time it took.
type Rate struct {
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
}

// MBPerSec returns the rate in 10^6 bytes per second, 0 for an empty measurement.
func (r Rate) MBPerSec() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Bytes) / 1e6 / r.Seconds
}

// RawWrite measures the ceiling a shipper is compared with: it writes total bytes into
// new files of fileBytes each under dir, in 1 MiB writes, closing each file (Close is
// HDFS's only checkpoint, as for a commit round), one after the other. The rate runs from
// the first Create to the last Close; each file is one call bounded by conn's timeout.
func RawWrite(ctx context.Context, conn *Conn, dir string, total, fileBytes int64) (Rate, error) {
	if total <= 0 || fileBytes <= 0 {
		return Rate{}, errors.New("hdfs: raw write: sizes must be positive")
	}
	buf := make([]byte, rawIO)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	if err := conn.do(ctx, "mkdir "+dir, func(cl *hdfs.Client) error { return cl.MkdirAll(dir, 0o755) }); err != nil {
		return Rate{}, err
	}
	start := time.Now()
	var r Rate
	for i := 0; r.Bytes < total; i++ {
		p := path.Join(dir, fmt.Sprintf("raw-%04d", i))
		n := min(fileBytes, total-r.Bytes)
		err := conn.do(ctx, "raw write "+p, func(cl *hdfs.Client) error { return writeRaw(cl, p, buf, n) })
		if err != nil {
			return r, err
		}
		r.Bytes += n
	}
	r.Seconds = time.Since(start).Seconds()
	return r, nil
}

// writeRaw writes n bytes, buf over and over, as the new file p and closes it.
func writeRaw(cl *hdfs.Client, p string, buf []byte, n int64) error {
	fw, err := cl.Create(p)
	if err != nil {
		return err
	}
	for left := n; left > 0; left -= int64(len(buf)) {
		if _, err := fw.Write(buf[:min(int64(len(buf)), left)]); err != nil {
			fw.Close()
			return err
		}
	}
	return closeFile(fw)
}

// RawRead measures the ceiling a reader is compared with: it reads every file under dir
// whole, one after the other, in 1 MiB reads, and returns the rate from the first Open
// to the last read. Each file is one call bounded by conn's timeout.
func RawRead(ctx context.Context, conn *Conn, dir string) (Rate, error) {
	var names []string
	err := conn.do(ctx, "list "+dir, func(cl *hdfs.Client) error {
		fis, err := cl.ReadDir(dir)
		for _, fi := range fis {
			if !fi.IsDir() {
				names = append(names, fi.Name())
			}
		}
		return err
	})
	if err != nil {
		return Rate{}, err
	}
	buf := make([]byte, rawIO)
	start := time.Now()
	var r Rate
	for _, name := range names {
		n, err := readRaw(ctx, conn, path.Join(dir, name), buf)
		r.Bytes += n
		if err != nil {
			return r, err
		}
	}
	r.Seconds = time.Since(start).Seconds()
	return r, nil
}

// readRaw reads the file p whole into buf, len(buf) bytes at a time, and returns how
// many bytes it read.
func readRaw(ctx context.Context, conn *Conn, p string, buf []byte) (int64, error) {
	var n int64
	err := conn.do(ctx, "raw read "+p, func(cl *hdfs.Client) error {
		fr, err := cl.Open(p)
		if err != nil {
			return err
		}
		defer fr.Close()
		for {
			k, err := io.ReadFull(fr, buf)
			n += int64(k)
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
	})
	return n, err
}

// ReadCold compares a cold read through a Reader with a raw read of the same file: it
// writes a file of about size bytes of 1 MiB batches (1 KiB records) under dir, then,
// passes times, reads it from offset 0 to its end through a fresh Reader and a fresh arena
// block cache (1 MiB reads, each cached in 64 KiB chunks, every batch CRC-checked),
// followed by a raw read of the file in 1 MiB reads. It returns the sums over the passes.
func ReadCold(ctx context.Context, conn *Conn, dir string, size int64, passes int) (viaReader, raw Rate, err error) {
	end, err := writeReadFile(ctx, conn, dir, size)
	if err != nil {
		return viaReader, raw, err
	}
	arena, err := memarena.New(memarena.Config{Size: 256 << 20})
	if err != nil {
		return viaReader, raw, fmt.Errorf("cannot make an arena for the block cache: %w", err)
	}
	defer arena.Close()
	buf := make([]byte, rawIO)
	for range passes {
		rd, rw, err := readPass(ctx, conn, dir, end, arena, buf)
		if err != nil {
			return viaReader, raw, err
		}
		viaReader.Bytes, viaReader.Seconds = viaReader.Bytes+rd.Bytes, viaReader.Seconds+rd.Seconds
		raw.Bytes, raw.Seconds = raw.Bytes+rw.Bytes, raw.Seconds+rw.Seconds
	}
	return viaReader, raw, nil
}

// writeReadFile writes about size bytes of 1 MiB batches into one file of a partition
// directory dir and returns the offset after the last batch.
func writeReadFile(ctx context.Context, conn *Conn, dir string, size int64) (int64, error) {
	w := NewWriter(dir, 1, 0, WriterOptions{RollBytes: 1 << 40})
	for int64(w.Next())*1000 < size {
		if err := w.Commit(ctx, conn, [][]byte{bigBatch(w.Next(), 1000)}); err != nil {
			return 0, err
		}
	}
	return w.Next(), nil
}

// readPass reads the partition in dir from offset 0 to end through a fresh Reader and
// block cache, then its one file raw.
func readPass(ctx context.Context, conn *Conn, dir string, end int64, arena *memarena.Arena, buf []byte) (viaReader, raw Rate, err error) {
	blocks, err := arena.NewBlockCache(0) // cold: a fresh cache each pass
	if err != nil {
		return viaReader, raw, fmt.Errorf("cannot make a block cache: %w", err)
	}
	defer blocks.Close()
	t0 := time.Now()
	r := NewReader(conn, dir, ArenaCache{Blocks: blocks, Size: int(arena.Stats().ChunkSize)})
	if err := r.Refresh(ctx); err != nil {
		return viaReader, raw, err
	}
	if len(r.files) != 1 {
		return viaReader, raw, fmt.Errorf("hdfs: read pass: %d files in %s, want 1", len(r.files), dir)
	}
	for o := int64(0); o < end; {
		data, next, err := r.Read(ctx, o, rawIO)
		if err != nil {
			return viaReader, raw, err
		}
		viaReader.Bytes += int64(len(data))
		o = next
	}
	viaReader.Seconds = time.Since(t0).Seconds()
	t1 := time.Now()
	raw.Bytes, err = readRaw(ctx, conn, path.Join(dir, r.files[0].name), buf)
	raw.Seconds = time.Since(t1).Seconds()
	return viaReader, raw, err
}

// bigBatch builds a batch of n records of 1000-byte values at offset o, as a producer
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
