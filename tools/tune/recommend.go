package tune

import (
	"fmt"
	"io"
	"strings"
)

// Setting is a recommended broker setting (a key of the broker's config file) and why.
type Setting struct {
	Key, Value, Why string
}

// Advice is a recommendation for the host itself (not a broker key): a limit, a kernel
// setting.
type Advice struct {
	What, Why string
}

const (
	mib = int64(1) << 20
	gib = int64(1) << 30
)

// arenaStep rounds arena sizes (a multiple of every chunk size the broker accepts).
const arenaStep = 256 * mib

// Recommend derives the broker's settings and advice for the host.
func Recommend(h Host) ([]Setting, []Advice) {
	var out []Setting
	var adv []Advice
	// The arena holds every partition's write buffer and the HDFS block cache; reads of
	// local segments go by sendfile from the page cache, so the page cache gets a
	// quarter of memory (at least 2 GiB) and the system 1 GiB.
	pageCache := max(h.MemTotal/4, 2*gib)
	arena := h.MemTotal - pageCache - gib
	why := fmt.Sprintf("memory %s: a quarter (at least 2 GiB) left to the page cache, which serves reads of segments by sendfile, and 1 GiB to the system", size(h.MemTotal))
	if h.MemAvailable > 0 && arena > h.MemAvailable-gib {
		arena = h.MemAvailable - gib
		why = fmt.Sprintf("only %s of memory is available now (other services): the arena keeps 1 GiB of it free", size(h.MemAvailable))
	}
	arena = max(arena/arenaStep*arenaStep, arenaStep)
	out = append(out, Setting{"arena.size", exact(arena), why})
	// Prefault only with room to spare: the arena and half the page cache's share.
	prefault := arena+pageCache/2 <= h.MemAvailable
	pwhy := "the arena fits in available memory with room for the page cache: faulting it in at start keeps page faults off the produce path"
	if !prefault {
		pwhy = "available memory leaves the page cache little beside the arena: fault the arena in as it is used"
	}
	out = append(out, Setting{"arena.prefault", fmt.Sprint(prefault), pwhy})
	out = append(out, Setting{"shards", fmt.Sprint(max(h.Cores, 1)), "one shard per core this process may run on"})
	out = append(out, Setting{"loops", fmt.Sprint(max(h.Cores, 1)), "one event loop per core"})
	switch h.FSType {
	case "tmpfs", "ramfs":
		adv = append(adv, Advice{"put the data directory on a disk", h.DataDir + " is on " + h.FSType + ": nothing survives a reboot, and O_DIRECT is not supported (the persister falls back to buffered writes)"})
	case "":
	default:
		if h.DiskRotational {
			out = append(out, Setting{"log.fsync_interval", "20ms", "the kernel reports the disk rotational: group fsyncs 20 ms apart keep seeks from bounding throughput (drop this line for an SSD behind a virtual disk that says otherwise)"})
		}
	}
	if h.DiskSize > 0 && h.DiskFree < h.DiskSize/10 {
		adv = append(adv, Advice{"free space on " + h.DataDir, fmt.Sprintf("%s free of %s: a full disk refuses writes (no_space); set log.retention_bytes or log.retention", size(h.DiskFree), size(h.DiskSize))})
	}
	if h.NoFileSoft < 65536 {
		adv = append(adv, Advice{"raise the open-file limit to 1048576 (LimitNOFILE in deploy/sluice.service)",
			fmt.Sprintf("ulimit -n is %d (hard %d): the broker takes at most half as many partitions (each keeps its active segment open) and needs the rest for connections and sealed segments being read", h.NoFileSoft, h.NoFileHard)})
	}
	if h.THP == "always" {
		adv = append(adv, Advice{"set transparent huge pages to madvise (echo madvise > /sys/kernel/mm/transparent_hugepage/enabled)",
			"with always, the kernel compacts memory to make huge pages behind the arena's back: latency spikes, and MADV_DONTNEED on idle slabs frees less"})
	}
	if h.DirtyBytes == 0 && h.DirtyRatio >= 20 && h.MemTotal >= 16*gib {
		adv = append(adv, Advice{"lower vm.dirty_ratio or set vm.dirty_bytes (e.g. 1 GiB)",
			fmt.Sprintf("dirty_ratio %d%% of %s lets gigabytes of dirty pages build up: the broker writes O_DIRECT, but whatever else writes buffered (an HDFS DataNode, logs) flushes in storms", h.DirtyRatio, size(h.MemTotal))})
	}
	return out, adv
}

// Write prints the host, the settings as a broker config file with each reason as a
// comment, and the advice as comments.
func Write(w io.Writer, h Host, s []Setting, a []Advice) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# sluice broker settings for this host (sluice tune).\n")
	limit := ""
	if h.MemLimit > 0 {
		limit = ", the cgroup's limit"
	}
	fmt.Fprintf(&b, "# host: %d cores, %s memory%s (%s available), %s on %s", h.Cores, size(h.MemTotal), limit, size(h.MemAvailable), h.DataDir, orUnknown(h.FSType))
	if h.DiskSize > 0 {
		kind := "not rotational"
		if h.DiskRotational {
			kind = "rotational, as the kernel reports it"
		}
		fmt.Fprintf(&b, " (%s, %s free of %s)", kind, size(h.DiskFree), size(h.DiskSize))
	}
	fmt.Fprintf(&b, ", ulimit -n %d, transparent huge pages %s\n\n", h.NoFileSoft, orUnknown(h.THP))
	for _, x := range s {
		fmt.Fprintf(&b, "# %s\n%s = %s\n\n", x.Why, x.Key, x.Value)
	}
	for _, x := range a {
		fmt.Fprintf(&b, "# host: %s\n#   why: %s\n", x.What, x.Why)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// size renders bytes in the broker's size syntax (GiB or MiB, whole units).
func size(n int64) string {
	switch {
	case n >= gib && n%gib == 0:
		return fmt.Sprintf("%dGiB", n/gib)
	case n >= gib:
		return fmt.Sprintf("%.1fGiB", float64(n)/float64(gib))
	default:
		return fmt.Sprintf("%dMiB", n/mib)
	}
}

// exact renders bytes for a config value: whole GiB, else whole MiB (the broker's size
// syntax takes no fractions).
func exact(n int64) string {
	if n%gib == 0 {
		return fmt.Sprintf("%dGiB", n/gib)
	}
	return fmt.Sprintf("%dMiB", n/mib)
}
