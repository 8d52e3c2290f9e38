package local

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"sluice/persist/vfs"
)

// SyncMode says when Persist fdatasyncs what it wrote, which is also when the durable
// checkpoint advances. When Persist runs is the caller's (the broker's persister): every
// SyncInterval, sooner when SyncBytes are pending, and at once for SyncEveryBatch.
type SyncMode int

const (
	// SyncGroup fdatasyncs the active segment on every Persist that wrote: the driver
	// calls Persist every SyncInterval (or once SyncBytes are pending), so one
	// fdatasync covers every batch placed meanwhile.
	SyncGroup SyncMode = iota
	// SyncEveryBatch fdatasyncs like SyncGroup; the driver calls Persist as soon as
	// anything is placed, so each produce waits for its own write and sync.
	SyncEveryBatch
	// SyncNever leaves flushing to the operating system, like Kafka's default. The durable
	// checkpoint then means "written to the file": it advances on every Persist and
	// survives a process crash, not a host crash. As Kafka flushes a segment when it
	// rolls, a segment is fsynced once when it is sealed and the recovery point moves
	// over it (and Open fsyncs what it recovered, and Close everything): after a crash,
	// recovery scans the active segment only.
	SyncNever
)

func (m SyncMode) String() string {
	switch m {
	case SyncGroup:
		return "group"
	case SyncEveryBatch:
		return "batch"
	case SyncNever:
		return "never"
	}
	return fmt.Sprintf("SyncMode(%d)", int(m))
}

// ParseSyncMode parses "group", "batch" or "never".
func ParseSyncMode(s string) (SyncMode, error) {
	for _, m := range []SyncMode{SyncGroup, SyncEveryBatch, SyncNever} {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("unknown fsync mode %q (want group, batch or never)", s)
}

// Bounds of the roll settings that Validate enforces.
const (
	MinSegmentBytes = 4 << 10
	MaxSegmentBytes = 1 << 40
	MinSegmentAge   = time.Second
	// MaxSegmentAge is 100 years: what the broker passes for "never roll by age".
	MaxSegmentAge = 100 * 365 * 24 * time.Hour
)

// Options configure a Log. The zero value is usable after EnsureDefaults.
type Options struct {
	// FS is the filesystem; default the operating system's.
	FS vfs.FS
	// SegmentBytes rolls to a new segment before a batch would take the active one past
	// this size. Default 1 GiB; at least MinSegmentBytes, at most MaxSegmentBytes.
	SegmentBytes int64
	// SegmentAge rolls a segment this long after its first append. Default 7 days; at
	// least MinSegmentAge (a client asking for a roll per batch would otherwise get one
	// file per batch), at most MaxSegmentAge.
	SegmentAge time.Duration
	// IndexInterval is the number of log bytes between sparse index entries. Default 4 KiB.
	IndexInterval int64
	// RetentionBytes deletes the oldest whole segments while the log would stay at least
	// this large without them; 0 keeps everything.
	RetentionBytes int64
	// RetentionAge deletes whole segments whose newest timestamp is older than this and
	// that were sealed longer ago than this (so a producer's clock cannot have fresh data
	// deleted: ApplyRetention); 0 keeps everything.
	RetentionAge time.Duration
	// Sync is the fsync policy of Persist.
	Sync SyncMode
	// SyncInterval and SyncBytes are for the caller that runs Persist (the broker's
	// persister): every SyncInterval while data is pending, and at once when SyncBytes
	// are pending. The log itself does not read them. Defaults 5 ms and 4 MiB.
	SyncInterval time.Duration
	SyncBytes    int64
	// InitialOffset is the base offset of the first segment of a new, empty log.
	InitialOffset int64
	// RecoveryPointInterval is how often, at most, Persist rewrites the recovery point (the
	// durable record of the checkpoint that recovery truncates above, never below; see
	// Open). Close always writes it. A longer interval costs fewer fsyncs; a shorter one
	// leaves less of the log for recovery to scan after a crash, and less acknowledged
	// data that recovery would take for a torn tail if it were corrupt. Default 30 s; at
	// least 1 s, at most 1 hour.
	RecoveryPointInterval time.Duration
	// Files bounds the read descriptors that segments keep open; share one pool between
	// every log of a process (the broker makes one for all its partitions). Default: a
	// pool of this log's own, sized by FilePoolLimit.
	Files *FilePool
	// Strict re-reads and verifies every segment when it is sealed (slow; for tests and
	// paranoid operators).
	Strict bool
	// Clock returns the current time; default time.Now. Injected so tests control the
	// recovery point's interval, an opened segment's age and retention (Place takes the
	// time of each placement from its caller).
	Clock func() time.Time
	// Logger receives recovery and retention reports; default discards.
	Logger *slog.Logger
	// Discard, when set, takes the files of the segments that retention (or Truncate)
	// deleted, renamed to *.deleted, and removes them off the caller's goroutine:
	// unlinking a large file frees its extents (on this project's ext4, mounted with
	// discard, about 20 ms for 64 MiB), a retention pass may delete dozens, and
	// ApplyRetention runs on the partition's owner, which serves its reads meanwhile. A
	// crash before they are removed leaves *.deleted files, which Open removes. A file
	// that cannot be renamed is removed at once. nil: every file is removed at once.
	Discard func(paths []string)
	// ReuseSegments is how many segment files retention deleted the log keeps, renamed
	// to *.deleted, to write its next segments into (reuse.go): a new segment then
	// allocates no disk space and an old one frees none, which on a filesystem mounted
	// with discard is the whole cost of a retention pass under a steady load (about 10-20
	// ms of device time per 64 MiB unlinked). Files still unused at the next retention
	// pass go to Discard, so the log never holds more disk than just before a pass;
	// files a reader still has open are never kept. 0 means the default, 32; negative
	// keeps none.
	ReuseSegments int
}

// DefaultReuseSegments is ReuseSegments' default: enough to cover a retention interval
// of rolls (30 s of a partition written at 70 MB/s in segments of 64 MiB, at 1 GiB/s
// in segments of 1 GiB).
const DefaultReuseSegments = 32

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.FS == nil {
		o.FS = vfs.Default()
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = 1 << 30
	}
	if o.SegmentAge == 0 {
		o.SegmentAge = 7 * 24 * time.Hour
	}
	if o.ReuseSegments == 0 {
		o.ReuseSegments = DefaultReuseSegments
	}
	if o.IndexInterval == 0 {
		o.IndexInterval = 4 << 10
	}
	if o.SyncInterval == 0 {
		o.SyncInterval = 5 * time.Millisecond
	}
	if o.SyncBytes == 0 {
		o.SyncBytes = 4 << 20
	}
	if o.RecoveryPointInterval == 0 {
		o.RecoveryPointInterval = 30 * time.Second
	}
	if o.Files == nil {
		o.Files = NewFilePool(FilePoolLimit())
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate reports the first setting that is out of range.
func (o *Options) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(o.SegmentBytes >= MinSegmentBytes && o.SegmentBytes <= MaxSegmentBytes,
		"segment bytes %d out of range [4KiB, 1TiB]", o.SegmentBytes)
	check(o.SegmentAge >= MinSegmentAge && o.SegmentAge <= MaxSegmentAge,
		"segment age %v out of range [%v, %v] (a shorter age makes a segment, and files, per batch)",
		o.SegmentAge, MinSegmentAge, MaxSegmentAge)
	check(o.RecoveryPointInterval >= time.Second && o.RecoveryPointInterval <= time.Hour,
		"recovery point interval %v out of range [1s, 1h]", o.RecoveryPointInterval)
	check(o.IndexInterval >= 1 && o.IndexInterval <= o.SegmentBytes,
		"index interval %d out of range [1, segment bytes]", o.IndexInterval)
	check(o.RetentionBytes >= 0, "retention bytes %d must not be negative", o.RetentionBytes)
	check(o.RetentionAge >= 0, "retention age %v must not be negative", o.RetentionAge)
	check(o.Sync >= SyncGroup && o.Sync <= SyncNever, "unknown fsync mode %v", o.Sync)
	check(o.SyncInterval > 0, "fsync interval %v must be positive", o.SyncInterval)
	check(o.SyncBytes > 0, "fsync bytes %d must be positive", o.SyncBytes)
	check(o.InitialOffset >= 0, "initial offset %d must not be negative", o.InitialOffset)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid log options: %w", err)
	}
	return nil
}

// String renders the options for logs.
func (o *Options) String() string {
	files := 0
	if o.Files != nil {
		files = o.Files.Limit()
	}
	return fmt.Sprintf("segment=%dB/%v index=%dB retention=%dB/%v fsync=%v(%v,%dB) recovery-point=%v files=%d strict=%v",
		o.SegmentBytes, o.SegmentAge, o.IndexInterval, o.RetentionBytes, o.RetentionAge,
		o.Sync, o.SyncInterval, o.SyncBytes, o.RecoveryPointInterval, files, o.Strict)
}
