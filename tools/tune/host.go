// Package tune reads what a host has (cores, memory, the data directory's disk, the
// open-file limit, transparent huge pages, dirty-page limits) and recommends the
// broker's settings for it, each with the reason: `sluice tune` prints them as a config
// file.
package tune

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"sluice/internal/memlimit"
)

// Host is what Inspect found. A figure it could not read is 0 (or "").
type Host struct {
	Cores          int    // CPUs this process may run on
	MemTotal       int64  // bytes
	MemAvailable   int64  // bytes
	MemLimit       int64  // the process's cgroup memory limit, bytes; 0 when none
	DataDir        string // the data directory asked about
	DiskSize       int64  // its filesystem's size, bytes
	DiskFree       int64  // bytes available to the broker
	DiskRotational bool   // its device is a spinning disk (/sys/block/*/queue/rotational)
	FSType         string // e.g. ext4, xfs, tmpfs
	NoFileSoft     uint64 // RLIMIT_NOFILE
	NoFileHard     uint64
	THP            string // transparent huge pages: always, madvise or never
	DirtyRatio     int64  // vm.dirty_ratio (percent), 0 when dirty_bytes is used
	DirtyBytes     int64  // vm.dirty_bytes
}

// Inspect reads the host. dataDir need not exist yet: its nearest existing parent is
// measured.
func Inspect(dataDir string) (Host, error) {
	h := Host{DataDir: dataDir, Cores: cores()}
	mem, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return h, fmt.Errorf("cannot read memory figures: %w", err)
	}
	h.MemTotal, h.MemAvailable = meminfo(mem, "MemTotal"), meminfo(mem, "MemAvailable")
	if limit, used, ok := memlimit.Read(); ok {
		// A container's or a unit's limit is the memory there is: what the host has
		// beyond it ends in the OOM killer.
		h.MemLimit = limit
		h.MemTotal = min(h.MemTotal, limit)
		h.MemAvailable = min(h.MemAvailable, max(limit-used, 0))
	}
	dir := existingParent(dataDir)
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return h, fmt.Errorf("cannot measure the filesystem of %s: %w", dir, err)
	}
	h.DiskSize, h.DiskFree = int64(st.Blocks)*st.Bsize, int64(st.Bavail)*st.Bsize
	h.FSType, h.DiskRotational = mountOf(dir)
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil {
		h.NoFileSoft, h.NoFileHard = rl.Cur, rl.Max
	}
	if b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); err == nil {
		h.THP = selected(string(b))
	}
	h.DirtyRatio = readInt("/proc/sys/vm/dirty_ratio")
	h.DirtyBytes = readInt("/proc/sys/vm/dirty_bytes")
	return h, nil
}

// cores counts the CPUs this process may run on (a cgroup or taskset may allow fewer
// than the machine has).
func cores() int {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) == nil {
		return set.Count()
	}
	return runtime.NumCPU()
}

// meminfo returns a /proc/meminfo field in bytes (0 when missing).
func meminfo(b []byte, key string) int64 {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != key {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0
		}
		kb, _ := strconv.ParseInt(f[0], 10, 64)
		return kb << 10
	}
	return 0
}

// selected returns the bracketed choice of a sysfs list: "always [madvise] never".
func selected(s string) string {
	if i := strings.IndexByte(s, '['); i >= 0 {
		if j := strings.IndexByte(s[i:], ']'); j > 0 {
			return s[i+1 : i+j]
		}
	}
	return strings.TrimSpace(s)
}

func readInt(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

func existingParent(dir string) string {
	dir, _ = filepath.Abs(dir)
	for {
		if _, err := os.Stat(dir); err == nil || dir == "/" {
			return dir
		}
		dir = filepath.Dir(dir)
	}
}

// mountOf finds the filesystem type of the mount holding dir (the longest mount point
// that is a prefix) and whether its block device rotates.
func mountOf(dir string) (fstype string, rotational bool) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return "", false
	}
	best, dev := "", ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		mp := f[1]
		if (dir == mp || strings.HasPrefix(dir, strings.TrimSuffix(mp, "/")+"/")) && len(mp) >= len(best) {
			best, dev, fstype = mp, f[0], f[2]
		}
	}
	if name := filepath.Base(dev); strings.HasPrefix(dev, "/dev/") {
		for _, n := range []string{name, strings.TrimRight(name, "0123456789")} {
			if v := readInt(filepath.Join("/sys/block", n, "queue/rotational")); v == 1 {
				return fstype, true
			}
		}
	}
	return fstype, false
}
