package codec

import (
	"errors"
	"io"

	"github.com/klauspost/compress/zstd"
)

// zstdMaxBlock is the most one zstd block decodes to: Block_Maximum_Size, the smaller of
// the frame's window and 128 KiB (RFC 8878 §3.1.1.2.4). The decoder refuses a block that
// decodes to more.
const zstdMaxBlock = 128 << 10

// zstdChecksumSize is the length of a frame's Content_Checksum, when its header has one.
const zstdChecksumSize = 4

// The causes of the errors of zstdFrame that are not io.ErrUnexpectedEOF or the zstd
// package's.
var (
	errZstdBlock       = errors.New("zstd block of the reserved type")
	errZstdContentSize = errors.New("zstd frame's blocks cannot decode to its header's content size")
)

// zstdFrame splits the first frame off src, reading only its frame header and its blocks'
// 3-byte headers, never its compressed data. frame is the whole frame (nil for a
// skippable frame, which decodes to nothing), bound the most it can decode to, exact
// whether it must decode to exactly bound (its header gives its content size), rest the bytes after it.
//
// A section is walked this way before a buffer of the batch header's size is allocated
// for it: its frames' bounds add up to at most 43 690 times its length (a 3-byte header
// per 128 KiB block), so a few bytes of junk claiming 64 MiB are refused for the price of
// reading their headers. The walk also cuts the section into frames, so that the decoder
// is given frames alone: junk after the last frame is refused (the decoder would ignore
// up to 3 bytes of it), and skippable frames are skipped here (the decoder prints a line
// to standard error for each).
func zstdFrame(src []byte) (frame, rest []byte, bound uint64, exact bool, err error) {
	var fh zstd.Header
	body, err := fh.DecodeAndStrip(src)
	if err != nil {
		return nil, nil, 0, false, err
	}
	if fh.Skippable {
		if uint64(len(body)) < uint64(fh.SkippableSize) {
			return nil, nil, 0, false, io.ErrUnexpectedEOF
		}
		return nil, body[fh.SkippableSize:], 0, true, nil
	}
	for last := false; !last; {
		if len(body) < 3 {
			return nil, nil, 0, false, io.ErrUnexpectedEOF
		}
		bh := uint32(body[0]) | uint32(body[1])<<8 | uint32(body[2])<<16
		body = body[3:]
		last = bh&1 != 0
		size := int(bh >> 3)
		stored := size // bytes the block occupies after its header
		switch bh >> 1 & 3 {
		case 0: // raw: size bytes, copied
			bound += uint64(size)
		case 1: // RLE: one byte, repeated size times
			bound += uint64(size)
			stored = 1
		case 2: // compressed: size bytes, decoding to at most a block
			bound += zstdMaxBlock
		default:
			return nil, nil, 0, false, errZstdBlock
		}
		if len(body) < stored {
			return nil, nil, 0, false, io.ErrUnexpectedEOF
		}
		body = body[stored:]
	}
	if fh.HasCheckSum {
		if len(body) < zstdChecksumSize {
			return nil, nil, 0, false, io.ErrUnexpectedEOF
		}
		body = body[zstdChecksumSize:]
	}
	if fh.HasFCS {
		if fh.FrameContentSize > bound {
			return nil, nil, 0, false, errZstdContentSize
		}
		bound = fh.FrameContentSize
	}
	n := len(src) - len(body)
	return src[:n:n], body, bound, fh.HasFCS, nil
}

// zstdBounds returns the least and the most the frames of src decode to together
// (zstdFrame), or the error of the first frame that is not one. A frame whose header
// gives its content size must decode to exactly that (the decoder checks it), so it
// counts for that size in both bounds; one without counts for nothing in least.
func zstdBounds(src []byte) (least, most uint64, err error) {
	for len(src) > 0 {
		_, rest, bound, exact, err := zstdFrame(src)
		if err != nil {
			return 0, 0, err
		}
		if exact {
			least += bound
		}
		most += bound
		src = rest
	}
	return least, most, nil
}
