package bench

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUUse is the processor time a run's measured part took: the harness's (producers and
// consumers, this process), the server's (when the harness knows its pid) and the host's
// over the same wall-clock time. On two shared cores a latency tail is mostly queueing
// for a core, so a latency figure means little without the share of the cores the run
// kept busy; steal is the hypervisor running someone else on them.
//
// The processes' times may include time stolen while they ran (on these hosts they do:
// the kernel counts a task's time by the clock, and a stolen vCPU's clock goes on), so a
// run under heavy steal looks heavier than the same run without; read Harness and
// Server beside HostSteal.
type CPUUse struct {
	// Wall is the measured part's length; Harness and Server the processes' user and
	// system time over it, all in seconds. Server is 0 when the server's pid is unknown.
	Wall    float64 `json:"wall_s"`
	Harness float64 `json:"harness_s"`
	Server  float64 `json:"server_s,omitempty"`
	// Cores is the number of processors the host offers.
	Cores int `json:"cores"`
	// HostBusy and HostSteal are the host's processors' shares (0-1) busy with anything
	// (this run, other processes, the kernel) and stolen by the hypervisor, from
	// /proc/stat; apart, so HostBusy+HostSteal <= 1; both 0 where it cannot be read.
	HostBusy  float64 `json:"host_busy"`
	HostSteal float64 `json:"host_steal"`
	// HarnessSwitches and ServerSwitches are the processes' voluntary context switches
	// over the measured part: each a thread that blocked and was woken again, which on a
	// virtual machine costs tens of µs of processor time (the machine line's wake cost).
	// At low rates they, not the bytes, are what the cores go to. ServerSwitches is 0
	// when the server's pid is unknown (or it has no /proc).
	HarnessSwitches float64 `json:"harness_switches,omitempty"`
	ServerSwitches  float64 `json:"server_switches,omitempty"`
}

// cpuMark is the processor time of the harness, the server and the host at one moment.
type cpuMark struct {
	at                  time.Time
	harness, server     time.Duration
	serverOK            bool
	harnessSw, serverSw uint64 // voluntary context switches
	serverSwOK          bool
	host                hostTicks
	hostOK              bool
}

// markCPU reads the processor times now; serverPid 0 means no server.
func markCPU(serverPid int) cpuMark {
	m := cpuMark{at: time.Now()}
	m.harness, m.harnessSw = selfCPU()
	if serverPid > 0 {
		m.server, m.serverOK = procCPU(serverPid)
		m.serverSw, m.serverSwOK = procSwitches(serverPid)
	}
	m.host, m.hostOK = readHostTicks()
	return m
}

// cpuSince returns the use from mark a to mark b.
func cpuSince(a, b cpuMark) *CPUUse {
	u := &CPUUse{Wall: b.at.Sub(a.at).Seconds(), Harness: (b.harness - a.harness).Seconds(), Cores: runtime.NumCPU(),
		HarnessSwitches: float64(b.harnessSw - a.harnessSw)}
	if a.serverOK && b.serverOK {
		u.Server = (b.server - a.server).Seconds()
	}
	if a.serverSwOK && b.serverSwOK && b.serverSw >= a.serverSw { // threads that ended take their counts along
		u.ServerSwitches = float64(b.serverSw - a.serverSw)
	}
	if a.hostOK && b.hostOK && u.Wall > 0 {
		// Shares of the wall-clock time of every processor, not of the sum of /proc/stat's
		// fields: that sum falls short of it when the busy time is many short bursts
		// (idle and steal are kept to the nanosecond, busy time is sampled at the
		// timer tick, which a burst that ended before it misses). Signed differences:
		// the kernel says iowait may go backwards.
		ticks := u.Wall * float64(u.Cores) * clockTicks
		idle := float64(int64(b.host.idle - a.host.idle))
		steal := float64(int64(b.host.steal - a.host.steal))
		u.HostSteal = clamp01(steal / ticks)
		u.HostBusy = clamp01(1 - (idle+steal)/ticks)
	}
	return u
}

// clamp01 bounds v to [0, 1].
func clamp01(v float64) float64 { return min(max(v, 0), 1) }

// selfCPU returns this process's user and system time and its voluntary context switches
// (every thread's, those that ended too).
func selfCPU() (time.Duration, uint64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), uint64(max(ru.Nvcsw, 0))
}

// procSwitches returns the voluntary context switches of process pid's threads, summed
// over /proc/pid/task/*/status (the process's own status counts its first thread only);
// false when they cannot be read. A thread that ended is no longer counted.
func procSwitches(pid int) (uint64, bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, false
	}
	var sum uint64
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/status")
		if err != nil {
			continue // ended meanwhile
		}
		n, ok := parseSwitches(b)
		if !ok {
			return 0, false
		}
		sum += n
	}
	return sum, true
}

// parseSwitches reads voluntary_ctxt_switches from a /proc/.../status file.
func parseSwitches(b []byte) (uint64, bool) {
	const field = "\nvoluntary_ctxt_switches:"
	i := bytes.Index(b, []byte(field))
	if i < 0 {
		return 0, false
	}
	line, _, _ := bytes.Cut(b[i+len(field):], []byte{'\n'})
	n, err := strconv.ParseUint(string(bytes.TrimSpace(line)), 10, 64)
	return n, err == nil
}

// clockTicks is the unit of /proc's processor times (USER_HZ). It is 100 on every Linux
// architecture Go builds for (it is a fixed ABI value, not the kernel's HZ); reading it
// would need sysconf(3) and so cgo.
const clockTicks = 100

// procCPU returns the user and system time of process pid (every thread's) from
// /proc/pid/stat; false when it cannot be read (no such process, not Linux).
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseProcStat(b)
}

// parseProcStat reads utime and stime (fields 14 and 15) from a /proc/pid/stat line.
// The command name (field 2) is in parentheses and may hold spaces and parentheses, so
// the fields are counted from the last ')'.
func parseProcStat(b []byte) (time.Duration, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(u+s) * time.Second / clockTicks, true
}

// hostTicks are the host's processor times summed over its processors, in clock ticks.
type hostTicks struct{ idle, steal uint64 }

// readHostTicks reads the first line of /proc/stat.
func readHostTicks() (hostTicks, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return hostTicks{}, false
	}
	return parseHostTicks(b)
}

// parseHostTicks reads the aggregate "cpu" line of /proc/stat: user nice system idle
// iowait irq softirq steal (guest time is inside user and nice already). Idle counts
// iowait too: a processor waiting for the disk could run anything.
func parseHostTicks(b []byte) (hostTicks, bool) {
	line, _, _ := bytes.Cut(b, []byte{'\n'})
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return hostTicks{}, false
	}
	var v [8]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			return hostTicks{}, false
		}
		v[i] = n
	}
	return hostTicks{idle: v[3] + v[4], steal: v[7]}, true
}

// String formats the use as "1.64 of 2 cores (harness 0.86, server 0.78); thread
// switches 14000 + 13000 a second; host 85 % busy, 4 % steal".
func (u *CPUUse) String() string {
	if u == nil || u.Wall <= 0 {
		return ""
	}
	s := fmt.Sprintf("%.2f of %d cores (harness %.2f", (u.Harness+u.Server)/u.Wall, u.Cores, u.Harness/u.Wall)
	if u.Server > 0 {
		s += fmt.Sprintf(", server %.2f", u.Server/u.Wall)
	}
	s += ")"
	if u.HarnessSwitches > 0 {
		s += fmt.Sprintf("; thread switches %.0f", u.HarnessSwitches/u.Wall)
		if u.ServerSwitches > 0 {
			s += fmt.Sprintf(" + %.0f", u.ServerSwitches/u.Wall)
		}
		s += " a second"
	}
	if u.HostBusy > 0 {
		s += fmt.Sprintf("; host %.0f %% busy, %.0f %% steal", 100*u.HostBusy, 100*u.HostSteal)
	}
	return s
}
