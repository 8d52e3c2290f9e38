package persist

import "sluice/batch"

// Store is a partition's stored log; see the package comment for the contract, which
// says which goroutine may call each method.
type Store interface {
	// Append writes one whole, validated batch at the end of the log, stamping its base
	// offset into b (outside the CRC), and returns that offset. On ErrNoSpace nothing was
	// appended and the store is still usable. On ErrFailed or ErrDamaged it accepts no
	// more writes. Owner only.
	Append(b []byte) (int64, error)
	// Sync makes everything appended so far durable and advances Durable to cover it.
	// A failed sync fails the store for good (it is never retried). Persister only.
	Sync() error
	// Pending returns the bytes appended and not yet covered by Durable. Persister or
	// owner.
	Pending() int64

	// Bounds returns the first offset held and the offset the next batch gets.
	Bounds() (start, next int64)
	// Durable returns the checkpoint C; start-1 when nothing is durable.
	Durable() int64
	// Damage returns the corruption found when the store was opened (a
	// *CorruptionError), or nil.
	Damage() error
	// Size returns the bytes the store holds (for estimates, such as how far back to read
	// producer sequences when a partition loads).
	Size() (int64, error)

	// ReadRegion returns whole batches starting with the one holding offset, up to
	// maxBytes but at least one batch, from one file. An offset equal to Next returns an
	// empty region; one outside [Start, Next] an *OffsetOutOfRangeError; in a damaged
	// store, one at or past the damage (which is Next) the *CorruptionError. A region
	// never holds a header that fails its checks: it stops before bad data. The caller
	// releases the region.
	ReadRegion(offset, maxBytes int64) (Region, error)
	// OffsetForTime returns the base offset of the first batch whose max timestamp is at
	// least ts (Unix ms), or Next when there is none.
	OffsetForTime(ts int64) (int64, error)
	// WalkHeaders calls fn with the header of every batch from the one holding offset to
	// the end, in order, until fn returns false. Bad data (in a damaged store, the damage)
	// ends the walk with a *CorruptionError whose Offset is set.
	WalkHeaders(offset int64, fn func(h batch.Header) bool) error

	// ApplyRetention deletes the oldest data the retention settings let go, never above
	// limit (the caller passes what must be kept: the checkpoint, or what a remote tier
	// has not acknowledged yet). It returns how many files it deleted. Owner only.
	ApplyRetention(limit int64) (int, error)
	// Truncate removes every batch above last (a batch's last offset, or Start-1 to
	// empty the log). Owner only.
	Truncate(last int64) error
	// Close makes what was appended durable (by the policy) and releases the files.
	// Owner only.
	Close() error
}
