package batch

import (
	"bytes"
	"strconv"
	"testing"
)

const benchBatch = 64 << 10 // target batch size in bytes

// benchRecords returns a key and a value that together make an encoded record of about
// recordSize bytes, and how many such records fill a 64 KiB batch.
func benchRecords(recordSize int) (key, value []byte, n int) {
	key = []byte("key-0000000000000")
	value = bytes.Repeat([]byte("v"), recordSize-len(key)-8)
	return key, value, (benchBatch - HeaderSize) / recordSize
}

func benchBuild(recordSize int) []byte {
	key, value, n := benchRecords(recordSize)
	var b Builder
	b.Reset(nil, 1, 0)
	for i := range n {
		b.Add(uint16(i), 1_700_000_000_000+int64(i), key, value)
	}
	return b.Finish()
}

// BenchmarkBuild builds 64 KiB batches of 1 KiB records into a reused buffer.
func BenchmarkBuild(b *testing.B) {
	key, value, n := benchRecords(1 << 10)
	buf := benchBuild(1 << 10)
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	var bld Builder
	for b.Loop() {
		bld.Reset(buf[:0], 1, 0)
		for i := range n {
			bld.Add(uint16(i), 1_700_000_000_000+int64(i), key, value)
		}
		buf = bld.Finish()
	}
}

// BenchmarkBuildGrow builds 1 MiB batches of 1 KiB records, each begun in a fresh 64 KiB
// buffer: a batch that outgrows the buffer its producer guessed for it (Builder.grow).
func BenchmarkBuildGrow(b *testing.B) {
	key, value, _ := benchRecords(1 << 10)
	n := (1<<20 - HeaderSize) / (1 << 10)
	b.SetBytes(int64(n) << 10)
	b.ReportAllocs()
	var bld Builder
	for b.Loop() {
		bld.Reset(make([]byte, 0, benchBatch), 1, 0)
		for i := range n {
			bld.Add(uint16(i), 1_700_000_000_000+int64(i), key, value)
		}
		bld.Finish()
	}
}

// BenchmarkIter iterates a 64 KiB batch without the CRC check (ResetTrusted, the path of
// the log's readers) and with it (Reset), for 1 KiB and 100-byte records.
func BenchmarkIter(b *testing.B) {
	for _, size := range []int{1 << 10, 100} {
		batch := benchBuild(size)
		for _, crc := range []bool{false, true} {
			name := strconv.Itoa(size) + "B"
			if crc {
				name += "/crc"
			}
			b.Run(name, func(b *testing.B) {
				b.SetBytes(int64(len(batch)))
				b.ReportAllocs()
				var it Iter
				for b.Loop() {
					iterate(b, &it, batch, crc)
				}
			})
		}
	}
}

func iterate(b *testing.B, it *Iter, batch []byte, crc bool) {
	var err error
	if crc {
		err = it.Reset(batch)
	} else {
		err = it.ResetTrusted(batch)
	}
	if err != nil {
		b.Fatal(err)
	}
	var sum int
	for it.Next() {
		sum += len(it.Record().Value)
	}
	if it.Err() != nil || sum == 0 {
		b.Fatal(it.Err())
	}
}

// BenchmarkCheck validates the header and CRC of a 64 KiB batch.
func BenchmarkCheck(b *testing.B) {
	batch := benchBuild(1 << 10)
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Check(batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseHeader decodes and validates a header alone.
func BenchmarkParseHeader(b *testing.B) {
	batch := benchBuild(1 << 10)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseHeader(batch); err != nil {
			b.Fatal(err)
		}
	}
}
