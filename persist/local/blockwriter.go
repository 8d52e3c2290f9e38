package local

import (
	"fmt"
	"unsafe"

	"sluice/persist/vfs"
)

// Block is the unit of every segment write: the alignment of memory, file positions and
// lengths that O_DIRECT needs (docs/writepath.md §1).
const Block = vfs.DirectAlign

// bounceBlocks is the size, in blocks, of the buffer that source pieces which are not
// aligned are copied through: a write of such pieces is split into writes of this size.
const bounceBlocks = 64

// iovMax is the most buffers the block writer gives one WriteVec (IOV_MAX).
const iovMax = 1024

// blockWriter writes byte ranges of one segment file in whole, aligned blocks (see
// write). It keeps the file's partial last block in tail, so that a write that starts
// inside a block never needs the bytes before it from the source: the bytes already
// written are rewritten unchanged from tail. Persister only (Log.persistMu).
type blockWriter struct {
	f       vfs.File
	written int64 // bytes of the file written (data; the padding after it is not counted)
	// tail holds the file's bytes [written&^(Block-1), written) and zeros after them;
	// spare is a second block, for the last block of a write whose first block is tail.
	tail, spare []byte
	bounce      []byte // bounceBlocks aligned blocks; allocated on first use
	bused       int    // bytes of bounce in the pending writes

	iov    [][]byte // pending buffers, back to back from the file position iovPos
	iovPos int64
	iovLen int64
	copied int64 // bytes copied into tail, spare and bounce (for tests and benchmarks)
}

// reset makes w write f, whose data ends at written; tail holds the file's bytes of the
// block holding written, up to written (empty when written is a multiple of Block).
func (w *blockWriter) reset(f vfs.File, written int64, tail []byte) {
	if w.tail == nil {
		blocks := alignedBlocks(2)
		w.tail, w.spare = blocks[:Block:Block], blocks[Block:]
	}
	if int64(len(tail)) != written%Block {
		panic(fmt.Sprintf("BUG: a tail of %d bytes for a file written to %d", len(tail), written))
	}
	w.f, w.written = f, written
	clear(w.tail)
	copy(w.tail, tail)
}

// alignedBlocks returns n zeroed blocks of memory that start at a Block-aligned address.
// (The Go heap never moves an object, so the alignment holds for the slice's life.)
func alignedBlocks(n int) []byte {
	b := make([]byte, (n+1)*Block)
	skip := (Block - int(uintptr(unsafe.Pointer(&b[0]))%Block)) % Block
	return b[skip : skip+n*Block : skip+n*Block]
}

// aligned reports whether b starts at a Block-aligned address.
func aligned(b []byte) bool { return uintptr(unsafe.Pointer(&b[0]))%Block == 0 }

// write writes the file's bytes [w.written, to), given in order by pieces (which hold
// exactly to-w.written bytes), as whole blocks from w.written&^(Block-1) to to rounded up:
//
//   - the first block, when w.written is inside one, is completed in tail (which holds
//     its bytes before w.written): less than a block copied;
//   - whole blocks that lie in one piece at an aligned address go to the file straight
//     from it, neighbours merged into one buffer;
//   - whole blocks that do not are assembled in the bounce buffer (a source that breaks
//     the alignment promise costs a copy, never correctness);
//   - the last block, when to is inside one, is assembled in a zeroed block: its bytes
//     after to are zeros (padding that the next write overwrites with data).
//
// It issues as few WriteVec calls as the bounce buffer and IOV_MAX allow. On success the
// block holding to becomes tail. On an error the file's state past w.written is unknown
// (the caller fails the log; nothing is retried).
func (w *blockWriter) write(pieces [][]byte, to int64) error {
	from := w.written
	start := from &^ (Block - 1)
	w.iov, w.iovPos, w.iovLen, w.bused = w.iov[:0], start, 0, 0
	src := pieceReader{pieces: pieces}
	pos := from
	tailUsed := from > start // tail is in this write as its first block
	if tailUsed {
		n := min(to-from, start+Block-from)
		w.copied += int64(src.read(w.tail[from-start : from-start+n]))
		pos += n
		if err := w.emit(w.tail); err != nil {
			return err
		}
	}
	for to-pos >= Block {
		if p := src.peek(); len(p) >= Block && aligned(p) {
			n := min(int64(len(p)), to-pos) &^ (Block - 1)
			if err := w.emit(p[:n]); err != nil {
				return err
			}
			src.skip(int(n))
			pos += n
			continue
		}
		b, err := w.bounceBlock()
		if err != nil {
			return err
		}
		w.copied += int64(src.read(b))
		if err := w.emit(b); err != nil {
			return err
		}
		pos += Block
	}
	last := w.tail // the block that holds to, when to is inside one
	if pos < to {
		if tailUsed {
			last = w.spare
			clear(last)
		}
		w.copied += int64(src.read(last[:to-pos]))
		if err := w.emit(last); err != nil {
			return err
		}
	}
	if src.left() != 0 {
		panic(fmt.Sprintf("BUG: %d bytes of the pieces left after writing [%d, %d)", src.left(), from, to))
	}
	if err := w.flush(); err != nil {
		return err
	}
	switch {
	case pos < to && tailUsed: // the new partial block was assembled in spare
		w.tail, w.spare = w.spare, w.tail
	case pos == to && to%Block == 0 && tailUsed: // tail was completed: no partial block now
		clear(w.tail)
	}
	w.written = to
	return nil
}

// emit appends b to the pending buffers, merging it into the previous one when it
// follows it in memory, and writes them first when IOV_MAX would be passed.
func (w *blockWriter) emit(b []byte) error {
	if n := len(w.iov); n > 0 {
		// Merged only within one allocation (the capacity proves it): a buffer spanning
		// two would be invalid even where they happen to be neighbours.
		prev := w.iov[n-1]
		if cap(prev)-len(prev) >= len(b) && &prev[:len(prev)+1][len(prev)] == &b[0] {
			w.iov[n-1] = prev[:len(prev)+len(b)]
			w.iovLen += int64(len(b))
			return nil
		}
		if n == iovMax {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	w.iov = append(w.iov, b)
	w.iovLen += int64(len(b))
	return nil
}

// bounceBlock returns the next free block of the bounce buffer, writing what is pending
// first when it is used up.
func (w *blockWriter) bounceBlock() ([]byte, error) {
	if w.bounce == nil {
		w.bounce = alignedBlocks(bounceBlocks)
	}
	if w.bused == len(w.bounce) {
		if err := w.flush(); err != nil {
			return nil, err
		}
	}
	b := w.bounce[w.bused : w.bused+Block] // capacity to the end: neighbours merge in emit
	w.bused += Block
	return b, nil
}

// flush writes the pending buffers at iovPos.
func (w *blockWriter) flush() error {
	if len(w.iov) == 0 {
		return nil
	}
	if _, err := w.f.WriteVec(w.iov, w.iovPos); err != nil {
		return err
	}
	clear(w.iov) // drop references to the source's memory
	w.iov, w.iovPos, w.iovLen, w.bused = w.iov[:0], w.iovPos+w.iovLen, 0, 0
	return nil
}

// pieceReader reads a list of byte slices as one stream.
type pieceReader struct {
	pieces [][]byte
	off    int // read position in pieces[0]
}

// peek returns the unread rest of the current piece (nil at the end).
func (r *pieceReader) peek() []byte {
	for len(r.pieces) > 0 && r.off == len(r.pieces[0]) {
		r.pieces, r.off = r.pieces[1:], 0
	}
	if len(r.pieces) == 0 {
		return nil
	}
	return r.pieces[0][r.off:]
}

// skip moves past n bytes of the current piece.
func (r *pieceReader) skip(n int) { r.off += n }

// read fills dst from the stream, across pieces, and returns the bytes copied (fewer
// than len(dst) only at the end of the stream).
func (r *pieceReader) read(dst []byte) int {
	n := 0
	for n < len(dst) {
		p := r.peek()
		if p == nil {
			break
		}
		c := copy(dst[n:], p)
		r.skip(c)
		n += c
	}
	return n
}

// left returns the unread bytes.
func (r *pieceReader) left() int {
	n := 0
	for i, p := range r.pieces {
		if i == 0 {
			p = p[r.off:]
		}
		n += len(p)
	}
	return n
}
