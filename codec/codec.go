// Package codec compresses and decompresses the records section of sluice batches
// (docs/format.md §1). It is the only package that imports the compression libraries
// (github.com/klauspost/compress and github.com/pierrec/lz4/v4); everything else names a
// codec with batch.Codec and comes here to apply it.
//
// A producer builds a batch with batch.Builder and finishes it with Compressor.Finish,
// which compresses Builder.Records and hands the result to Builder.FinishCompressed (that
// stores the section uncompressed when compression does not make it smaller). A consumer
// decompresses with Decompressor.Records, or checks a batch and starts a batch.Iter over
// its records with Decompressor.Iter.
//
// What each codec stores as the records section, the whole section being one unit:
//
//	none  the records, as they are
//	zstd  one Zstandard frame (RFC 8878) with its content size and no content checksum:
//	      the batch CRC already covers the stored bytes
//	s2    one S2 block (github.com/klauspost/compress/s2): a uvarint of the decompressed
//	      size, then the block; a Snappy block is a valid S2 block
//	lz4   one raw LZ4 block, no frame: the header's uncompressed size is its only size
//
// A reader also takes what other encoders make of these formats (several zstd frames, a
// zstd checksum, which it verifies). It decompresses into a buffer of exactly the header's
// uncompressed size and refuses a section that decodes to any other size. A size beyond
// what a batch may hold is refused before anything is allocated, and so is one that an s2
// or lz4 section cannot decode to: hostile input makes a Decompressor allocate at most one
// buffer of batch.MaxSize, which it then keeps and reuses.
//
// Concurrency: a Compressor or a Decompressor is used by one goroutine at a time; keep one
// per goroutine. Each owns codec state (under 1 MiB, allocated when a codec is first used)
// and a buffer as large as the largest batch it has handled. Different ones run in
// parallel freely. Neither starts goroutines, so neither needs closing: an
// unreachable one is garbage-collected like any value. ParseCodec may be called from any
// goroutine.
package codec

import (
	"fmt"

	"sluice/batch"
)

// ParseCodec returns the codec named name, one of "none", "zstd", "s2" and "lz4" (the
// names batch.Codec.String returns, in any ASCII case: "ZSTD" is zstd, "zſtd" is
// refused, which Unicode case folding would take for it), for flags and configuration
// files.
func ParseCodec(name string) (batch.Codec, error) {
	for c := batch.CodecNone; c <= batch.CodecLZ4; c++ {
		if equalFoldASCII(name, c.String()) {
			return c, nil
		}
	}
	return batch.CodecNone, fmt.Errorf("cannot parse codec %q: %w", name, ErrUnknownName)
}

// equalFoldASCII reports whether s and t are equal once their ASCII upper-case letters
// are made lower case. strings.EqualFold folds Unicode too: "ſ" (long s) and "s" match.
func equalFoldASCII(s, t string) bool {
	if len(s) != len(t) {
		return false
	}
	for i := range len(s) {
		if lowerASCII(s[i]) != lowerASCII(t[i]) {
			return false
		}
	}
	return true
}

// lowerASCII returns c made lower case if it is an ASCII upper-case letter.
func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
