package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The disk ceilings measure what the data directory's disk takes, in the harness process,
// with no messaging at all: 1 MiB blocks written sequentially into one preallocated
// (fallocate) file, for a total of at least 3× the host's dirty-page limit, so that
// the page cache cannot absorb the run.
//
//   - buffered: write(2) through the page cache, no fdatasync until the end (as a broker
//     with fsync off, which is how every system runs in the suite): the rate writeback
//     sustains once the dirty limit throttles the writer.
//   - direct: O_DIRECT from a page-aligned buffer (mmap), fdatasync every 64 MiB (as the
//     memory-first write path's persister, docs/writepath.md): the device's rate.
//
// Both rates count the final fdatasync. The file is deleted right after each run. A
// filesystem that refuses O_DIRECT (tmpfs and others: EINVAL) gives a result that says
// so instead of an error.

// Disk ceiling modes.
const (
	DiskBuffered = "buffered"
	DiskDirect   = "direct"
)

const (
	diskBlock     = 1 << 20
	diskSyncEvery = 64 << 20
)

// DiskOptions bound a disk ceiling run.
type DiskOptions struct {
	Dir  string // where the file goes (the data directory's filesystem)
	Mode string // DiskBuffered or DiskDirect
	// Total is the bytes to write, a multiple of 64 MiB (see DiskTarget).
	Total int64
	// Cap bounds the run's time; a run stopped by it reports what it wrote.
	Cap time.Duration
}

// DiskResult is what a disk ceiling run measured.
type DiskResult struct {
	Mode      string  `json:"mode"`
	FS        string  `json:"filesystem"`
	Target    int64   `json:"target_bytes"`
	Bytes     int64   `json:"bytes"`
	Seconds   float64 `json:"seconds"`
	MBPerSec  float64 `json:"mb_per_sec"` // 10^6 B/s, the final fdatasync included
	SyncEvery int64   `json:"sync_every_bytes"`
	// WriteMBPerSec is the rate until the last write returned, before the final
	// fdatasync (for buffered writes, what a writer sees).
	WriteMBPerSec float64 `json:"write_mb_per_sec"`
	// Refused is set when the filesystem refused O_DIRECT; Note says why or what else
	// bounded the run.
	Refused bool   `json:"refused,omitempty"`
	Note    string `json:"note,omitempty"`
}

// DirtyLimit returns the host's dirty-page limit in bytes and how it was found:
// vm.dirty_bytes when set, otherwise vm.dirty_ratio percent of MemAvailable (the kernel
// takes the ratio of its "dirtyable" memory, free plus page cache, which MemAvailable
// approximates).
func DirtyLimit() (int64, string, error) {
	dirtyBytes, err := readProcInt("/proc/sys/vm/dirty_bytes")
	if err != nil {
		return 0, "", err
	}
	ratio, err := readProcInt("/proc/sys/vm/dirty_ratio")
	if err != nil {
		return 0, "", err
	}
	avail := int64(0)
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		avail = meminfoBytes(string(b), "MemAvailable:")
	}
	limit, how := dirtyLimitFrom(dirtyBytes, ratio, avail)
	if limit <= 0 {
		return 0, "", errors.New("cannot tell the dirty-page limit from /proc")
	}
	return limit, how, nil
}

func dirtyLimitFrom(dirtyBytes, ratio, memAvailable int64) (int64, string) {
	if dirtyBytes > 0 {
		return dirtyBytes, "vm.dirty_bytes"
	}
	return ratio * memAvailable / 100, fmt.Sprintf("vm.dirty_ratio %d%% of MemAvailable %.1f GiB", ratio, float64(memAvailable)/(1<<30))
}

func readProcInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// meminfoBytes returns a "kB" field of /proc/meminfo text in bytes, 0 if missing.
func meminfoBytes(meminfo, field string) int64 {
	for line := range strings.Lines(meminfo) {
		if rest, ok := strings.CutPrefix(line, field); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n << 10
			}
		}
	}
	return 0
}

// DiskSpace returns the bytes available to this user on dir's filesystem, the
// filesystem's size, and its name (ext4, xfs, tmpfs, ...).
func DiskSpace(dir string) (avail, size int64, fs string, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, "", fmt.Errorf("cannot statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * st.Bsize, int64(st.Blocks) * st.Bsize, fsName(st.Type), nil
}

func fsName(t int64) string {
	switch t {
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlayfs"
	case unix.F2FS_SUPER_MAGIC:
		return "f2fs"
	case unix.NFS_SUPER_MAGIC:
		return "nfs"
	}
	return fmt.Sprintf("fs 0x%x", t)
}

// DiskReserve is the free space the harness leaves to others on a filesystem of the
// given size: the larger of 8 GiB and a tenth of it.
func DiskReserve(size int64) int64 { return max(8<<30, size/10) }

// DiskTarget returns the bytes a disk ceiling should write: 3× the dirty limit rounded
// up to 64 MiB, scaled down (with a note) to what dir's filesystem can spare beyond
// DiskReserve, or to quick when quick > 0 (make bench-quick).
func DiskTarget(dir string, quick int64) (total, dirty int64, note string, err error) {
	dirty, how, err := DirtyLimit()
	if err != nil {
		return 0, 0, "", err
	}
	total = roundUp(3*dirty, diskSyncEvery)
	note = fmt.Sprintf("3× the dirty limit (%.1f GiB: %s)", float64(dirty)/(1<<30), how)
	if quick > 0 {
		total, note = quick, fmt.Sprintf("quick run: %.1f GiB, below 3× the dirty limit (%.1f GiB): the buffered figure includes the page cache", float64(quick)/(1<<30), float64(dirty)/(1<<30))
	}
	avail, size, _, err := DiskSpace(dir)
	if err != nil {
		return 0, 0, "", err
	}
	if spare := avail - DiskReserve(size); spare < total {
		total = max(spare/diskSyncEvery*diskSyncEvery, 0)
		note = fmt.Sprintf("scaled down to %.1f GiB (free %.1f GiB, %.1f GiB left to others): below 3× the dirty limit (%.1f GiB), the buffered figure includes the page cache",
			float64(total)/(1<<30), float64(avail)/(1<<30), float64(DiskReserve(size))/(1<<30), float64(dirty)/(1<<30))
	}
	return total, dirty, note, nil
}

func roundUp(v, m int64) int64 { return (v + m - 1) / m * m }

// DiskCeiling writes o.Total bytes in 1 MiB blocks into a new file in o.Dir as o.Mode
// says, deletes it, and returns the rate. An error is returned only for what stops the
// measurement itself (no directory, no memory); a refused O_DIRECT is a result.
func DiskCeiling(ctx context.Context, o DiskOptions) (*DiskResult, error) {
	_, _, fs, err := DiskSpace(o.Dir)
	if err != nil {
		return nil, err
	}
	r := &DiskResult{Mode: o.Mode, FS: fs, Target: o.Total}
	flags := unix.O_WRONLY | unix.O_CREAT | unix.O_TRUNC | unix.O_CLOEXEC
	switch o.Mode {
	case DiskBuffered:
	case DiskDirect:
		flags |= unix.O_DIRECT
		r.SyncEvery = diskSyncEvery
	default:
		return nil, fmt.Errorf("unknown disk ceiling mode %q", o.Mode)
	}
	if o.Total <= 0 || o.Total%diskSyncEvery != 0 {
		return nil, fmt.Errorf("disk ceiling total %d: a positive multiple of 64 MiB", o.Total)
	}
	// Page-aligned, as O_DIRECT requires of the memory; the same for both modes.
	buf, err := unix.Mmap(-1, 0, diskBlock, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("cannot map the source buffer: %w", err)
	}
	defer unix.Munmap(buf)
	fillPayload(buf, 7) // not zeros: a virtual disk may treat zero blocks specially
	path := filepath.Join(o.Dir, "sluice-bench-disk-"+o.Mode+".data")
	fd, err := unix.Open(path, flags, 0o644)
	if errors.Is(err, unix.EINVAL) && o.Mode == DiskDirect {
		r.Refused, r.Note = true, fs+" refused O_DIRECT at open (EINVAL)"
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot create %s: %w", path, err)
	}
	defer os.Remove(path)
	defer unix.Close(fd)
	if err := unix.Fallocate(fd, 0, 0, o.Total); err != nil {
		r.Note = fmt.Sprintf("no fallocate (%v): the file grows as written", err)
	}
	if err := diskWrite(ctx, o, fd, buf, r); err != nil {
		if errors.Is(err, unix.EINVAL) && o.Mode == DiskDirect {
			r.Refused, r.Note = true, fs+" refused an O_DIRECT write (EINVAL)"
			return r, nil
		}
		return nil, fmt.Errorf("cannot write %s: %w", path, err)
	}
	return r, nil
}

// diskWrite is the measured loop: writes, an fdatasync every r.SyncEvery bytes (if set),
// and one at the end; it stops early at o.Cap or when ctx ends, with a note.
func diskWrite(ctx context.Context, o DiskOptions, fd int, buf []byte, r *DiskResult) error {
	start := time.Now()
	deadline := start.Add(o.Cap)
	for r.Bytes < o.Total {
		n, err := unix.Write(fd, buf)
		if err != nil {
			return err
		}
		if n != len(buf) {
			return fmt.Errorf("short write: %d of %d bytes", n, len(buf))
		}
		r.Bytes += int64(n)
		if r.Bytes%diskSyncEvery != 0 {
			continue
		}
		if r.SyncEvery > 0 && r.Bytes%r.SyncEvery == 0 && r.Bytes < o.Total {
			if err := unix.Fdatasync(fd); err != nil {
				return err
			}
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			r.Note = strings.TrimPrefix(r.Note+fmt.Sprintf("; stopped after %.1f GiB of %.1f GiB (time bound %v)",
				float64(r.Bytes)/(1<<30), float64(o.Total)/(1<<30), o.Cap), "; ")
			break
		}
	}
	written := time.Since(start)
	if err := unix.Fdatasync(fd); err != nil {
		return err
	}
	elapsed := time.Since(start)
	r.Seconds = elapsed.Seconds()
	r.MBPerSec = float64(r.Bytes) / elapsed.Seconds() / 1e6
	r.WriteMBPerSec = float64(r.Bytes) / written.Seconds() / 1e6
	return nil
}
