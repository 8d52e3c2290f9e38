package codec

import (
	"testing"

	"sluice/batch"
)

// benchBatch builds a batch of about 64 KiB of 1 KiB JSON-like records, uncompressed, and
// returns it with its header and records.
func benchBatch(b *testing.B) ([]byte, batch.Header, []rec) {
	recs := jsonRecords(30, (64<<10-batch.HeaderSize)/(1<<10), 1<<10)
	plain := build(new(Compressor), batch.CodecNone, recs)
	h, err := batch.Check(plain)
	if err != nil {
		b.Fatal(err)
	}
	return plain, h, recs
}

// reportRatio reports compressed/uncompressed as the "ratio" metric.
func reportRatio(b *testing.B, compressed, uncompressed int) {
	b.ReportMetric(float64(compressed)/float64(uncompressed), "ratio")
}

// BenchmarkCompress compresses the records section of a 64 KiB batch of 1 KiB records
// into a reused buffer (Compressor.Compress, the work Finish adds to Builder.Finish).
func BenchmarkCompress(b *testing.B) {
	plain, h, _ := benchBatch(b)
	src := h.Records(plain)
	for _, codec := range codecs {
		b.Run(codec.String(), func(b *testing.B) {
			var c Compressor
			dst := c.Compress(nil, codec, src)
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				dst = c.Compress(dst[:0], codec, src)
			}
			reportRatio(b, len(dst), len(src))
		})
	}
}

// BenchmarkFinish builds a 64 KiB batch of 1 KiB records and finishes it with each codec:
// the whole cost to a producer, Builder included.
func BenchmarkFinish(b *testing.B) {
	plain, _, recs := benchBatch(b)
	for _, codec := range codecs {
		b.Run(codec.String(), func(b *testing.B) {
			var c Compressor
			var bld batch.Builder
			buf := build(&c, codec, recs)
			b.SetBytes(int64(len(plain)))
			b.ReportAllocs()
			for b.Loop() {
				bld.Reset(buf[:0], 7, 3)
				for _, r := range recs {
					bld.Add(r.logical, r.ts, r.key, r.value)
				}
				buf = c.Finish(&bld, codec)
			}
			reportRatio(b, len(buf), len(plain))
		})
	}
}

// BenchmarkDecompress decompresses the records of a 64 KiB batch of 1 KiB records
// (Decompressor.Records, after the CRC check a consumer has done). Bytes are counted
// uncompressed.
func BenchmarkDecompress(b *testing.B) {
	plain, _, recs := benchBatch(b)
	for _, codec := range codecs {
		b.Run(codec.String(), func(b *testing.B) {
			var d Decompressor
			batchBytes := build(new(Compressor), codec, recs)
			h, err := batch.Check(batchBytes)
			if err != nil || h.Codec != codec {
				b.Fatalf("%v batch stored as %v: %v", codec, h.Codec, err)
			}
			d.Records(h, batchBytes) // warm the decoder up: its first calls allocate
			b.SetBytes(int64(h.UncompressedSize))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.Records(h, batchBytes); err != nil {
					b.Fatal(err)
				}
			}
			reportRatio(b, len(batchBytes), len(plain))
		})
	}
}

// BenchmarkIter checks, decompresses and iterates a 64 KiB batch of 1 KiB records
// (Decompressor.Iter and a full iteration): the whole cost to a consumer.
func BenchmarkIter(b *testing.B) {
	_, _, recs := benchBatch(b)
	for _, codec := range codecs {
		b.Run(codec.String(), func(b *testing.B) {
			var d Decompressor
			var it batch.Iter
			batchBytes := build(new(Compressor), codec, recs)
			h, _ := batch.Check(batchBytes)
			d.Iter(&it, batchBytes) // warm the decoder up: its first calls allocate
			b.SetBytes(int64(h.UncompressedSize))
			b.ReportAllocs()
			for b.Loop() {
				if err := d.Iter(&it, batchBytes); err != nil {
					b.Fatal(err)
				}
				for it.Next() {
				}
				if err := it.Err(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
