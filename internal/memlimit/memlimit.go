// Package memlimit reads the memory limit a cgroup puts on this process, so that sizing
// (sluice tune, the arena's check against memory) does not take a container's or a
// systemd unit's limit for the host's memory: an arena sized to the host in a 2 GiB
// cgroup is killed by the OOM killer (a review found `sluice tune` followed literally
// ending so).
package memlimit

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// unlimited is where a limit reads as none: cgroup v1 writes the largest page-aligned
// int64 for "no limit".
const unlimited = int64(1) << 62

// Read returns the memory limit of this process's cgroup and the cgroup's current
// usage, in bytes. ok is false when no limit applies or none can be read. Both cgroup
// versions are read: v2's memory.max of the process's cgroup and every ancestor (the
// smallest applies), v1's hierarchical limit of its memory cgroup.
func Read() (limit, usage int64, ok bool) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, 0, false
	}
	return read(b, "/sys/fs/cgroup")
}

// read is Read with /proc/self/cgroup's contents and the cgroup filesystem's root.
func read(procCgroup []byte, root string) (limit, usage int64, ok bool) {
	for _, line := range strings.Split(string(procCgroup), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			if l, u, ok := v2(root, f[2]); ok {
				return l, u, true
			}
		case hasController(f[1], "memory"):
			if l, u, ok := v1(filepath.Join(root, "memory"), f[2]); ok {
				return l, u, true
			}
		}
	}
	return 0, 0, false
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// own returns the directory of the cgroup at path under mount: the path as
// /proc/self/cgroup names it, or the mount itself when it is not there (a cgroup
// namespace shows the process's own cgroup as the mount's root).
func own(mount, path string) string {
	if d := filepath.Join(mount, path); dirExists(d) {
		return d
	}
	return mount
}

func v2(root, path string) (limit, usage int64, ok bool) {
	dir := own(root, path)
	limit = unlimited
	for d := dir; ; d = filepath.Dir(d) {
		if n, found := readLimit(filepath.Join(d, "memory.max")); found {
			limit = min(limit, n)
		}
		if d == root || len(d) <= len(root) {
			break
		}
	}
	if limit >= unlimited {
		return 0, 0, false
	}
	usage, _ = readLimit(filepath.Join(dir, "memory.current"))
	return limit, usage, true
}

func v1(mount, path string) (limit, usage int64, ok bool) {
	dir := own(mount, path)
	limit = unlimited
	if n, found := readLimit(filepath.Join(dir, "memory.limit_in_bytes")); found {
		limit = n
	}
	if b, err := os.ReadFile(filepath.Join(dir, "memory.stat")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, found := strings.CutPrefix(line, "hierarchical_memory_limit "); found {
				if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
					limit = min(limit, n)
				}
			}
		}
	}
	if limit >= unlimited {
		return 0, 0, false
	}
	usage, _ = readLimit(filepath.Join(dir, "memory.usage_in_bytes"))
	return limit, usage, true
}

// readLimit reads a file holding a byte count or "max"; found is false when it is
// missing, unreadable or "max".
func readLimit(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

func dirExists(d string) bool {
	st, err := os.Stat(d)
	return err == nil && st.IsDir()
}
