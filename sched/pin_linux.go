//go:build linux

package sched

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// pinThread locks the calling goroutine to its OS thread and that thread to
// core. It never unlocks: once the thread's mask is changed, unlocking would
// hand the pinned thread to other goroutines (DESIGN §7). If it fails the
// goroutine stays locked with the mask unchanged, which is harmless.
func pinThread(core int) error {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(core)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("sched_setaffinity to core %d: %w", core, err)
	}
	return nil
}

// allowedCPUs lists, in order, the CPUs the process may run on.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("cannot read CPU affinity: %w", err)
	}
	var cpus []int
	for cpu := 0; cpu < maxCore; cpu++ {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	return cpus, nil
}
