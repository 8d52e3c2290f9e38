package persist

import "sluice/persist/vfs"

// Region is a run of whole batches in one file: the bytes [Pos, Pos+Len) of File hold
// the batches with offsets [Offset, NextOffset). The network layer sends it with
// sendfile; ReadInto copies it. The region holds a reference to its file, so the file
// stays open (even if retention deletes it) until Release.
type Region struct {
	// File is the file holding the batches; valid until Release.
	File vfs.File
	// Pos and Len locate the batches in File.
	Pos, Len int64
	// Offset is the base offset of the first batch; it may be below the offset asked for,
	// since batches are never split. NextOffset follows the last batch.
	Offset, NextOffset int64

	ref Releaser
}

// Releaser drops a reference a Region holds.
type Releaser interface{ Release() }

// NewRegion returns a region holding ref, which Release drops once.
func NewRegion(f vfs.File, pos, n, offset, next int64, ref Releaser) Region {
	return Region{File: f, Pos: pos, Len: n, Offset: offset, NextOffset: next, ref: ref}
}

// EmptyRegion returns the region of no batches at offset (the end of the log).
func EmptyRegion(offset int64) Region { return Region{Offset: offset, NextOffset: offset} }

// Release drops the region's reference to its file and empties the region (no file, no
// bytes: a released region can never be sent or read; its offsets stay). It is safe to
// call twice and on an empty region.
func (r *Region) Release() {
	if r.ref != nil {
		r.ref.Release()
	}
	r.ref, r.File, r.Pos, r.Len = nil, nil, 0, 0
}

// Ref returns the reference the region holds (for the store that made it).
func (r *Region) Ref() Releaser { return r.ref }

// Empty reports whether the region holds no bytes (the offset asked for is the end).
func (r *Region) Empty() bool { return r.Len == 0 }
