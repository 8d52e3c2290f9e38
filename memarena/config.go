package memarena

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"sluice/internal/memlimit"
)

// Defaults applied by Config.EnsureDefaults.
const (
	DefaultSize          = 1 * GiB
	DefaultChunkSize     = 64 * KiB
	DefaultSlabSize      = 64 * MiB
	DefaultLowWatermark  = 0.05
	DefaultHighWatermark = 0.10
)

// Limits checked by Config.Validate.
const (
	MinChunkSize = 4 * KiB
	MaxChunkSize = 16 * MiB
	MaxSlabSize  = 1 * GiB
	// MaxBatchSize bounds one batch given to WriteBuffer.Append (the wire
	// format's own limit is 64 MiB; see docs/format.md).
	MaxBatchSize = 1 * GiB
	// maxChunks keeps chunk ids in a uint32 with room for sentinels.
	maxChunks = 1 << 31
	// maxSlabs bounds the slab table (128 bytes a slab).
	maxSlabs = 1 << 16
)

// Config sizes one host's arena. The zero value is not valid; call
// EnsureDefaults first. The names in messages (arena.size, ...) are the keys
// operators write in the broker's config file.
type Config struct {
	// Size is the whole budget in bytes (arena.size), a multiple of ChunkSize,
	// at most the host's physical memory. Memory is mapped lazily, slab by
	// slab, so an idle arena costs nothing.
	Size int64
	// ChunkSize is the unit of allocation and reclaim (arena.chunk_size): a
	// power of two from 4 KiB to 16 MiB. An idle partition keeps at most one.
	ChunkSize int64
	// SlabSize is the unit of mmap and of MADV_DONTNEED (arena.slab_size): a
	// power of two from ChunkSize to 1 GiB. The last slab may be shorter.
	SlabSize int64
	// LowWatermark is the fraction of Size that must stay free: below it,
	// allocations start reclaiming (arena.low_watermark).
	LowWatermark float64
	// HighWatermark is the fraction of Size free at which reclaim stops
	// (arena.high_watermark); above LowWatermark.
	HighWatermark float64
	// PartitionMin is what the reclaimer leaves in each write buffer unless
	// an allocation would otherwise fail (arena.partition_min).
	PartitionMin int64
	// PartitionMax caps one write buffer (arena.partition_max), a multiple
	// of ChunkSize; past it the buffer gives up its own durable chunks, then
	// refuses appends with ErrPartitionFull. Zero means Size.
	PartitionMax int64
	// Prefault maps and faults in the whole arena in the background after
	// New (arena.prefault), so that appends never fault on fresh memory, and
	// keeps it resident: idle slabs are not given back. Off by default; the
	// cost at start is in docs/memarena.md.
	Prefault bool
}

// EnsureDefaults fills zero fields with the defaults and returns c.
func (c *Config) EnsureDefaults() *Config {
	if c.Size == 0 {
		c.Size = DefaultSize
	}
	if c.ChunkSize == 0 {
		c.ChunkSize = DefaultChunkSize
	}
	if c.SlabSize == 0 {
		c.SlabSize = max(DefaultSlabSize, c.ChunkSize)
	}
	if c.HighWatermark == 0 {
		// An explicit LowWatermark of 0 (reclaim only when full) needs an
		// explicit HighWatermark too.
		if c.LowWatermark == 0 {
			c.LowWatermark, c.HighWatermark = DefaultLowWatermark, DefaultHighWatermark
		} else {
			c.HighWatermark = min(1, c.LowWatermark+DefaultHighWatermark-DefaultLowWatermark)
		}
	}
	if c.PartitionMax == 0 {
		c.PartitionMax = c.Size
	}
	return c
}

// Validate reports every problem with c, one per line, or nil.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	c.validateChunks(add)
	c.validateWatermarks(add)
	c.validatePartition(add)
	if phys, err := physicalMemory(); err == nil && c.Size > phys {
		add("arena.size %s exceeds physical memory %s", FormatSize(c.Size), approxSize(phys))
	} else if limit, _, ok := memlimit.Read(); ok && c.Size > limit {
		// The OOM killer would end the broker once the arena filled (at start, with
		// prefault): a review's 16 GiB arena in a 2 GiB cgroup died idle within 15 s.
		add("arena.size %s exceeds the memory limit of this process's cgroup, %s", FormatSize(c.Size), approxSize(limit))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("invalid arena config: %w", errors.Join(errs...))
}

func (c *Config) validateChunks(add func(string, ...any)) {
	if c.Size <= 0 {
		add("arena.size %s must be positive", FormatSize(c.Size))
	}
	if !isPow2(c.ChunkSize) || c.ChunkSize < MinChunkSize || c.ChunkSize > MaxChunkSize {
		add("arena.chunk_size %s must be a power of two from %s to %s",
			FormatSize(c.ChunkSize), FormatSize(MinChunkSize), FormatSize(MaxChunkSize))
		return
	}
	if c.Size > 0 && c.Size%c.ChunkSize != 0 {
		add("arena.size %s is not a multiple of arena.chunk_size %s", FormatSize(c.Size), FormatSize(c.ChunkSize))
	}
	if c.Size/c.ChunkSize >= maxChunks {
		add("arena.size %s holds too many chunks of %s: raise arena.chunk_size", FormatSize(c.Size), FormatSize(c.ChunkSize))
	}
	if !isPow2(c.SlabSize) || c.SlabSize < c.ChunkSize || c.SlabSize > MaxSlabSize {
		add("arena.slab_size %s must be a power of two from arena.chunk_size %s to %s",
			FormatSize(c.SlabSize), FormatSize(c.ChunkSize), FormatSize(MaxSlabSize))
	} else if c.Size/c.SlabSize >= maxSlabs {
		add("arena.slab_size %s cuts arena.size %s into more than %d slabs: raise it",
			FormatSize(c.SlabSize), FormatSize(c.Size), maxSlabs)
	}
}

func (c *Config) validateWatermarks(add func(string, ...any)) {
	lo, hi := c.LowWatermark, c.HighWatermark
	if !(lo >= 0 && lo < 1) {
		add("arena.low_watermark %v must be from 0 to below 1", lo)
	}
	if !(hi > 0 && hi <= 1) {
		add("arena.high_watermark %v must be above 0 and at most 1", hi)
	}
	if lo >= hi {
		add("arena.low_watermark %v must be below arena.high_watermark %v", lo, hi)
	}
}

func (c *Config) validatePartition(add func(string, ...any)) {
	if c.PartitionMin < 0 {
		add("arena.partition_min %s must not be negative", FormatSize(c.PartitionMin))
	}
	if c.PartitionMax < c.ChunkSize {
		add("arena.partition_max %s is below arena.chunk_size %s", FormatSize(c.PartitionMax), FormatSize(c.ChunkSize))
	} else if isPow2(c.ChunkSize) && c.PartitionMax%c.ChunkSize != 0 {
		add("arena.partition_max %s is not a multiple of arena.chunk_size %s", FormatSize(c.PartitionMax), FormatSize(c.ChunkSize))
	}
	if c.PartitionMax > c.Size {
		add("arena.partition_max %s exceeds arena.size %s", FormatSize(c.PartitionMax), FormatSize(c.Size))
	}
	if c.PartitionMin > c.PartitionMax {
		add("arena.partition_min %s exceeds arena.partition_max %s", FormatSize(c.PartitionMin), FormatSize(c.PartitionMax))
	}
}

// String formats c as the config keys an operator would write.
func (c Config) String() string {
	var b strings.Builder
	kv := func(k, v string) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("arena." + k + "=" + v)
	}
	kv("size", FormatSize(c.Size))
	kv("chunk_size", FormatSize(c.ChunkSize))
	kv("slab_size", FormatSize(c.SlabSize))
	kv("low_watermark", strconv.FormatFloat(c.LowWatermark, 'g', -1, 64))
	kv("high_watermark", strconv.FormatFloat(c.HighWatermark, 'g', -1, 64))
	kv("partition_min", FormatSize(c.PartitionMin))
	kv("partition_max", FormatSize(c.PartitionMax))
	kv("prefault", strconv.FormatBool(c.Prefault))
	return b.String()
}

func isPow2(n int64) bool { return n > 0 && n&(n-1) == 0 }

func log2(n int64) uint { return uint(bits.TrailingZeros64(uint64(n))) }

// physicalMemory returns the host's RAM; a variable so tests can pretend.
var physicalMemory = func() (int64, error) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0, fmt.Errorf("cannot read physical memory: %w", err)
	}
	return int64(si.Totalram) * int64(si.Unit), nil
}
