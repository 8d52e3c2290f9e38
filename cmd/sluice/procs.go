package main

import (
	"fmt"
	"strconv"
)

// brokerProcs is how many Go processors (GOMAXPROCS) the broker runs on: the procs
// setting when given; else what the runtime chose (cores) when the GOMAXPROCS
// environment variable is set (the operator's choice) or when that is below the CPUs
// the process may use (cpus: a container's CPU quota is in force, and a processor
// beyond it would have the kernel throttle the whole process for the rest of each
// quota period, a stall of its own); else one more than the cores.
//
// Why one more: gnet's event loops wait in epoll_wait, and the persisters write, in
// system calls that keep their processor. When every processor is held so, a goroutine
// made runnable (a shard woken by a timer or a persister's checkpoint, a persister by
// its ticker) has none to run on and waits for the runtime's monitor to take one back,
// up to 20 ms on a quiet broker. With a spare processor the runtime starts a thread for
// it at once. Measured at 10 000 records/s with sched.Scheduler.HandOff
// (docs/bench/latency-notebook.md): rounds whose p99.9 passed 5 ms went from 4 of 8 to
// 1 of 8, and the broker used less processor time (fewer retakes and thread
// hand-offs). The shards stay one per core (runBroker).
func brokerProcs(setting string, envSet bool, cores, cpus int) (int, error) {
	if setting != "" {
		n, err := strconv.Atoi(setting)
		if err != nil || n < 1 || n > maxProcs(cpus) {
			return 0, fmt.Errorf("procs: want a number from 1 to %d (four per CPU, %d here), got %q",
				maxProcs(cpus), cpus, setting)
		}
		return n, nil
	}
	if envSet || cores < cpus {
		return cores, nil
	}
	return cores + 1, nil
}

// maxProcs bounds the procs setting: four processors per CPU (at least 8) is far past
// any use (each one beyond the CPUs only adds threads that wait for them), and a typo of
// a few more digits would have the runtime allocate that many processors, each with its
// own caches, at startup.
func maxProcs(cpus int) int { return max(4*cpus, 8) }
