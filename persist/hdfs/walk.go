package hdfs

import (
	"fmt"

	"sluice/batch"
)

// walkBatches reads the batch headers in pieces, which hold whole batches back to back
// but may cut them anywhere (arena chunks): it checks that the first batch starts at
// offset next, each following one where the last ended, and that the last one ends with
// the pieces; it calls visit (if not nil) with each batch's position in the pieces and base offset,
// and returns the offset after the last batch and the pieces' size. It copies only
// headers (one per batch), never records.
func walkBatches(pieces [][]byte, next int64, visit func(pos, base int64)) (int64, int64, error) {
	var total int64
	for _, p := range pieces {
		total += int64(len(p))
	}
	var hdr [batch.HeaderSize]byte
	piece, inPiece := 0, 0 // where pos is in pieces
	var pos int64
	for pos < total {
		if total-pos < batch.HeaderSize {
			return 0, 0, fmt.Errorf("%d bytes at position %d are less than a batch header", total-pos, pos)
		}
		// Gather the header; it may span pieces.
		i, at := piece, inPiece
		for n := 0; n < len(hdr); {
			c := copy(hdr[n:], pieces[i][at:])
			n += c
			if at += c; at == len(pieces[i]) {
				i, at = i+1, 0
			}
		}
		h, err := batch.ParseHeader(hdr[:])
		if err != nil {
			return 0, 0, fmt.Errorf("batch at position %d: %w", pos, err)
		}
		if h.BaseOffset != next {
			return 0, 0, fmt.Errorf("batch at position %d has base offset %d, want %d", pos, h.BaseOffset, next)
		}
		if pos+int64(h.Size()) > total {
			return 0, 0, fmt.Errorf("batch at position %d (%d bytes) is cut by the end of the data", pos, h.Size())
		}
		if visit != nil {
			visit(pos, next)
		}
		next = h.LastOffset() + 1
		// Skip to the next batch.
		for skip := int64(h.Size()); skip > 0; {
			left := int64(len(pieces[piece]) - inPiece)
			if skip < left {
				inPiece += int(skip)
				break
			}
			skip -= left
			piece, inPiece = piece+1, 0
		}
		pos += int64(h.Size())
	}
	return next, total, nil
}
