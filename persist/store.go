package persist

import (
	"time"

	"sluice/batch"
)

// Store is a partition's stored log; see the package comment for the contract, which
// says which goroutine may call each method and what may block.
type Store interface {
	// Place reserves the place of one whole, validated batch of size bytes (h is its
	// parsed header) at the end of the log, without I/O: the batch gets the log's next
	// offset, lies in the segment and at the file position the Placement names, and is
	// recorded in that segment's in-memory index; Next moves past it. The bytes stay with
	// the caller, who stamps the base offset into them and hands them to Persist through
	// a Source. A batch that would take the active segment past its size or age, or past
	// what the index's 32-bit relative offsets hold, starts a new segment (Roll); one
	// larger than a segment may hold starts a segment of its own.
	//
	// Errors: ErrDamaged, ErrFailed, ErrClosed; ErrNoSpace after a Persist ran out of
	// space creating a file, until a later Persist succeeds. Nothing is placed on an error.
	// Owner only.
	Place(h batch.Header, size int64, now time.Time) (Placement, error)
	// Persist writes everything placed and not yet written, reading the bytes from src, in
	// order, segment by segment: a segment the log has moved past is finished (written,
	// synced, cut to its length, indexed, sealed) before the next one's file is created.
	// Then it makes the data durable by the store's policy and moves Durable to the last
	// offset wholly written and, by the policy, synced. It reports whether it wrote
	// anything.
	//
	// A write or sync error fails the store for good (ErrFailed; nothing is retried,
	// nothing below Durable is lost). ErrNoSpace means creating a file found the disk full:
	// nothing was lost, the store stays usable, and Place refuses until a later Persist
	// succeeds. An error from src is returned (wrapped) without writing the bytes asked
	// for, and the store stays usable. Persister only.
	Persist(src Source) (persisted bool, err error)
	// Pending returns the bytes placed and not yet covered by Durable. Any goroutine.
	Pending() int64
	// Tail returns the active segment's base offset and the position in its file where
	// the next batch goes, unless it rolls: where the owner's write buffer must start
	// after the store is opened. Owner only.
	Tail() (segment, pos int64)

	// Bounds returns the first offset held and the offset the next batch gets (placed
	// batches included).
	Bounds() (start, next int64)
	// Durable returns the checkpoint C; start-1 when nothing is durable. C never passes
	// what is written.
	Durable() int64
	// Damage returns the corruption found when the store was opened (a
	// *CorruptionError), or nil.
	Damage() error
	// Size returns the bytes the store holds on disk (for estimates, such as how far back
	// to read producer sequences when a partition loads).
	Size() (int64, error)

	// ReadRegion returns whole written batches starting with the one holding offset, up to
	// maxBytes but at least one batch, from one file. An offset in [Written, Next], placed
	// but not written yet (the owner serves those from its write buffer), returns an empty
	// region at offset; one outside [Start, Next] an *OffsetOutOfRangeError; in a damaged
	// store, one at or past the damage (which is Next) the *CorruptionError. A region
	// never extends past what is written and never holds a header that fails its checks:
	// it stops before bad data. The caller releases the region.
	ReadRegion(offset, maxBytes int64) (Region, error)
	// OffsetForTime returns the base offset of the first batch whose max timestamp is at
	// least ts (Unix ms), or Next when there is none. When that batch is placed but not
	// written yet, it returns where the written data ends (a batch boundary at or before
	// the answer), and the owner searches its write buffer from there.
	OffsetForTime(ts int64) (int64, error)
	// WalkHeaders calls fn with the header of every written batch from the one holding
	// offset to the written end, in order, until fn returns false. Bad data (in a damaged
	// store, the damage) ends the walk with a *CorruptionError whose Offset is set.
	WalkHeaders(offset int64, fn func(h batch.Header) bool) error

	// ApplyRetention deletes the oldest data the retention settings let go, never above
	// limit (the caller passes what must be kept: the checkpoint, or what a remote tier
	// has not acknowledged yet). It returns how many files it deleted. Owner only.
	ApplyRetention(limit int64) (int, error)
	// Truncate removes every batch above last (a batch's last offset, or Start-1 to
	// empty the log). Only with nothing pending (Pending() == 0). Owner only.
	Truncate(last int64) error
	// Close makes what is written durable (whatever the policy), records it, and releases
	// the files. It persists nothing: the owner runs a last Persist first. Owner, with
	// the persister stopped.
	Close() error
}

// DirectWriter is implemented by a store that writes its files with O_DIRECT where the
// filesystem allows it (persist/local); DirectIO reports false once the filesystem
// refused O_DIRECT and the store writes through the page cache instead. Any goroutine.
type DirectWriter interface {
	DirectIO() bool
}

// FileReuser is implemented by a store that starts new segments in the files retention
// deleted (persist/local's reuse): ReusedFiles counts the segments started so since the
// store opened. Any goroutine.
type FileReuser interface {
	ReusedFiles() int64
}

// DiskSizer is implemented by a store that keeps its data in files on the host
// (persist/local): DiskBytes is the bytes of data in them (not the space preallocated).
// Any goroutine; it takes no lock.
type DiskSizer interface {
	DiskBytes() int64
}

// Placement is where Place put a batch.
type Placement struct {
	// Base is the base offset the batch gets: the log's next offset before the Place.
	Base int64
	// Segment is the base offset of the segment the batch lies in; Pos its position in
	// that segment's file. The batch occupies [Pos, Pos+size) of the file.
	Segment, Pos int64
	// Roll is set when the batch starts a new segment (Pos is then 0): the owner's write
	// buffer pads its stream to the next multiple of 4096 before it (docs/writepath.md §1).
	Roll bool
}

// Source is what Persist reads placed bytes from: the owner's write buffer.
//
// The owner holds the source's lock across each Place and the copy of the batch's bytes
// into the source, and Persist reads how far the log is placed inside Settled, which
// takes that lock: so Persist never sees a placement whose bytes are not in the source
// yet. (Reading it outside the lock, a persister once saw a batch placed and then taken
// back when the arena was full, and asked for bytes that were never there; the owner
// now makes room in its buffer before it places, so a placement is never taken back.) Place never waits for
// Persist, so the lock is held only for in-memory work. Lock order: the store's
// persister lock (Persist holds it while it calls Settled and Bytes), then the source's
// lock, then the store's lock that Place takes; so the owner never calls Persist,
// Truncate or Close holding the source's lock.
type Source interface {
	// Bytes appends to dst the memory holding bytes [from, to) of the segment whose base
	// offset is seg, in order, and returns it with a release to call once written.
	// Pieces break at chunk boundaries; a piece that starts at a multiple of 4096 in the
	// file starts at a 4096-aligned address.
	Bytes(seg, from, to int64, dst [][]byte) ([][]byte, func(), error)
	// Settled calls f while no placement is under way (holding the source's lock).
	Settled(f func())
}
