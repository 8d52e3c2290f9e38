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
	hdr, err := s.window(s.pos, batch.HeaderSize)
	if err != nil {
		s.err = err
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

// Err returns the error that stopped the scan, or nil at a clean end.
func (s *scanner) Err() error { return s.err }
