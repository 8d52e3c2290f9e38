package local

import (
	"errors"
	"fmt"
	"io"

	"sluice/batch"
	"sluice/persist/vfs"
)

// scanBufSize is the read size of sequential scans: large enough that a scan costs few
// syscalls, small enough to be allocated once per scan without concern.
const scanBufSize = 1 << 20

// scanner reads the batches of one segment file in order, checking each header, its CRC,
// and that offsets continue without gaps. It is used by recovery, index rebuilds and
// `sluice segment verify`; reads on the serving path never scan more than an index
// interval.
//
// Zeros where a batch header should be (all of its 56 bytes, or all the bytes left when
// fewer remain) are the clean end of the data, not corruption: segment files are
// preallocated and their last block zero-padded (docs/writepath.md), so the bytes after
// the data of an active segment are zeros. Whether the data should have gone on (a
// sealed segment ending short of the next one, a log ending below its recovery point)
// is for the caller to decide, as for the end of the file.
type scanner struct {
	f    vfs.File
	path string
	end  int64 // bytes of the file to scan
	next int64 // expected base offset of the next batch

	buf    []byte
	bufPos int64 // file position of buf[0]

	pos   int64 // position of the current batch
	batch []byte
	h     batch.Header
	err   error // a *CorruptionError, or an I/O error
	// zeros is set when the scan stopped at zeros where a batch header should be: the
	// clean end of the data, followed by preallocated space or a block's padding.
	zeros bool
}

func newScanner(f vfs.File, path string, end, base int64) *scanner {
	return &scanner{f: f, path: path, end: end, next: base, buf: make([]byte, 0, scanBufSize)}
}

// Next advances to the next batch. It returns false at the end of the scanned range or on
// an error (see Err).
func (s *scanner) Next() bool {
	if s.err != nil {
		return false
	}
	if s.batch != nil {
		s.pos += int64(len(s.batch))
		s.batch = nil
	}
	if s.pos >= s.end {
		return false
	}
	hdr, err := s.window(s.pos, int(min(batch.HeaderSize, s.end-s.pos)))
	if err != nil {
		s.err = err
		return false
	}
	if allZero(hdr) { // no batch header is zeros (its magic is not): the data ends here
		s.zeros = true
		return false
	}
	if len(hdr) < batch.HeaderSize {
		s.err = s.corrupt("batch header cut short by the end of the file at %d", s.end)
		return false
	}
	h, err := batch.ParseHeader(hdr)
	if err != nil {
		s.err = s.corrupt("bad batch header: %v", err)
		return false
	}
	b, err := s.window(s.pos, h.Size())
	if err != nil {
		s.err = err
		return false
	}
	if _, err := batch.Check(b); err != nil {
		s.err = s.corrupt("%v", err)
		return false
	}
	if h.BaseOffset != s.next {
		s.err = s.corrupt("batch base offset %d, want %d", h.BaseOffset, s.next)
		return false
	}
	s.h, s.batch, s.next = h, b, h.LastOffset()+1
	return true
}

// allZero reports whether b holds only zeros.
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// window returns n bytes of the file at pos, refilling the buffer as needed.
func (s *scanner) window(pos int64, n int) ([]byte, error) {
	if pos+int64(n) > s.end {
		return nil, s.corrupt("batch of %d bytes cut short by the end of the file at %d", n, s.end)
	}
	off := pos - s.bufPos
	if off >= 0 && off+int64(n) <= int64(len(s.buf)) {
		return s.buf[off : off+int64(n)], nil
	}
	want := max(n, scanBufSize)
	want = int(min(int64(want), s.end-pos))
	if cap(s.buf) < want {
		s.buf = make([]byte, want)
	}
	s.buf = s.buf[:want]
	s.bufPos = pos
	if got, err := s.f.ReadAt(s.buf, pos); got < want {
		s.buf = s.buf[:0]
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("cannot read %s at %d: %w", s.path, pos, err)
	}
	return s.buf[:n], nil
}

func (s *scanner) corrupt(format string, args ...any) error {
	return &CorruptionError{File: s.path, Pos: s.pos, Offset: s.next, Reason: fmt.Sprintf(format, args...)}
}

// Err returns the error that stopped the scan, or nil at a clean end (the end of the
// file, or zeros).
func (s *scanner) Err() error { return s.err }
