package codec

import (
	"errors"
	"io"
	"math"

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
	errZstdBlockSize   = errors.New("zstd block larger than its frame's largest block")
	errZstdContentSize = errors.New("zstd frame's blocks cannot decode to its header's content size")
)

// zstdUnknownSize is the content size the zstd package reads as "not given" (an 8-byte
// field of all ones).
const zstdUnknownSize = math.MaxUint64

// zstdFrame splits the first frame off src, reading only its frame header and its blocks'
// 3-byte headers, never its compressed data. frame is the whole frame (nil for a
// skippable frame, which decodes to nothing), rest the bytes after it, and least and
// most bound what it decodes to: its content size, when its header gives one (the
// decoder holds it to that); else its raw and RLE blocks' sizes, exactly, and 0 to a
// block's largest size for each compressed block.
//
// A section is walked this way before a buffer of the batch header's size is allocated
// for it: its frames' most add up to at most 43 690 times its length (a 3-byte header
// per 128 KiB block), so a few bytes of junk claiming 64 MiB are refused for the price of
// reading their headers; and least, when raw and RLE blocks alone make more than the
// header's size, refuses what the decoder would write past its buffer (it appends a
// raw or RLE block whole before it checks its limit, growing the buffer). The walk also
// cuts the section into frames, so that the decoder is given frames alone: junk after
// the last frame is refused (the decoder would ignore up to 3 bytes of it), and
// skippable frames are skipped here (the decoder prints a line to standard error for
// each).
func zstdFrame(src []byte) (frame, rest []byte, least, most uint64, err error) {
	var fh zstd.Header
	body, err := fh.DecodeAndStrip(src)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	if fh.Skippable {
		if uint64(len(body)) < uint64(fh.SkippableSize) {
			return nil, nil, 0, 0, io.ErrUnexpectedEOF
		}
		return nil, body[fh.SkippableSize:], 0, 0, nil
	}
	// Block_Maximum_Size: the smaller of the window and 128 KiB, a single-segment
	// frame's window being its content size (at least 1 KiB, as the decoder takes it).
	// The decoder refuses a block larger than that; a compressed one decodes to no more.
	window := fh.WindowSize
	if fh.SingleSegment {
		window = max(fh.FrameContentSize, 1<<10)
	}
	maxBlock := min(zstdMaxBlock, window)
	for last := false; !last; {
		if len(body) < 3 {
			return nil, nil, 0, 0, io.ErrUnexpectedEOF
		}
		bh := uint32(body[0]) | uint32(body[1])<<8 | uint32(body[2])<<16
		body = body[3:]
		last = bh&1 != 0
		size := uint64(bh >> 3)
		if size > maxBlock {
			return nil, nil, 0, 0, errZstdBlockSize
		}
		stored := size // bytes the block occupies after its header
		switch bh >> 1 & 3 {
		case 0: // raw: size bytes, copied
			least, most = least+size, most+size
		case 1: // RLE: one byte, repeated size times
			least, most = least+size, most+size
			stored = 1
		case 2: // compressed: size bytes, decoding to at most a block
			most += maxBlock
		default:
			return nil, nil, 0, 0, errZstdBlock
		}
		if uint64(len(body)) < stored {
			return nil, nil, 0, 0, io.ErrUnexpectedEOF
		}
		body = body[stored:]
	}
	if fh.HasCheckSum {
		if len(body) < zstdChecksumSize {
			return nil, nil, 0, 0, io.ErrUnexpectedEOF
		}
		body = body[zstdChecksumSize:]
	}
	if fh.HasFCS && fh.FrameContentSize != zstdUnknownSize {
		if fh.FrameContentSize < least || fh.FrameContentSize > most {
			return nil, nil, 0, 0, errZstdContentSize
		}
		least, most = fh.FrameContentSize, fh.FrameContentSize
	}
	n := len(src) - len(body)
	return src[:n:n], body, least, most, nil
}

// zstdBounds returns the least and the most the frames of src decode to together
// (zstdFrame), or the error of the first frame that is not one.
func zstdBounds(src []byte) (least, most uint64, err error) {
	for len(src) > 0 {
		_, rest, l, m, err := zstdFrame(src)
		if err != nil {
			return 0, 0, err
		}
		least, most, src = least+l, most+m, rest
	}
	return least, most, nil
}
