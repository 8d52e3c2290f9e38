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
// quota period, a stall of its own); else twice the cores and one more.
//
// Why: gnet's event loops wait in epoll_wait, and the persisters write, in system calls
// that keep their processor, one loop and one persister per core by default. When every
// processor is held so, a goroutine made runnable (a shard woken by a timer or a
// persister's checkpoint, a persister by its ticker, a shard's goroutine a persister
// readied just before its write) has none to run on and waits for the runtime's monitor
// to take one back, up to 20 ms on a quiet broker; a spinning thread could steal it,
// but the runtime starts one only for an idle processor. So there is a processor for
// every loop and every persister, and one spare, and the runtime starts a thread for a
// runnable goroutine at once. Processors beyond the cores cost nothing while idle; what
// they add is the runtime's spinning for work when goroutines wake.
//
// Measured (docs/bench/latency-notebook.md): with cores + 1 and sched.Scheduler.HandOff
// the rounds at 10 000 records/s whose p99.9 passed 5 ms went from 4 of 8 to 1 of 8.
// That left the persisters: while the disk is slow (the kernel writing back another
// process's page cache, as a Kafka run leaves behind) both can sit in pwritev for
// milliseconds, and with cores + 1 the p99.9 at 10 000 records/s was 3.6-15.7 ms in 7
// rounds (the long-poll wake up to 25 ms); with 2 × cores + 1, 1.5-4.1 ms in 9, at no
// cost to burst produce and with a lower p99 at half load, for about 0.04 of a core
// more at 10 000 records/s. The shards stay one per core (runBroker).
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
	return 2*cores + 1, nil
}

// maxProcs bounds the procs setting: four processors per CPU (at least 8) is far past
// any use (each one beyond the CPUs only adds threads that wait for them), and a typo of
// a few more digits would have the runtime allocate that many processors, each with its
// own caches, at startup.
func maxProcs(cpus int) int { return max(4*cpus, 8) }
