//go:build linux

package sched

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestPinSetsAffinity: with Pin on, each shard's thread may run only on its
// core, and only while it runs that shard.
func TestPinSetsAffinity(t *testing.T) {
	cpus, err := allowedCPUs()
	if err != nil {
		t.Skip(err)
	}
	n := min(len(cpus), 2)
	cores := make([]int, n)
	for i := range cores {
		cores[i] = cpus[len(cpus)-1-i] // the last CPUs: not the default order
	}
	sc := start(t, Config{Shards: n, Pin: true, Cores: cores})
	for i := range n {
		s := sc.Shard(i)
		var set unix.CPUSet
		var getErr error
		do(t, s, func(*Shard) { getErr = unix.SchedGetaffinity(0, &set) })
		if getErr != nil {
			t.Fatal(getErr)
		}
		if set.Count() != 1 || !set.IsSet(cores[i]) {
			t.Errorf("shard %d: thread affinity has %d CPUs, core %d set: %v; want only core %d",
				i, set.Count(), cores[i], set.IsSet(cores[i]), cores[i])
		}
		if st := s.Stats(); st.Core != cores[i] {
			t.Errorf("shard %d: Stats.Core = %d, want %d", i, st.Core, cores[i])
		}
	}
	// The test goroutine's thread is untouched.
	var mine unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mine); err != nil || mine.Count() != len(cpus) {
		t.Fatalf("the caller's affinity changed: %d CPUs, err %v", mine.Count(), err)
	}
}

func TestUnpinnedShardsKeepAffinity(t *testing.T) {
	cpus, err := allowedCPUs()
	if err != nil {
		t.Skip(err)
	}
	sc := start(t, Config{Shards: 1})
	var set unix.CPUSet
	do(t, sc.Shard(0), func(*Shard) { _ = unix.SchedGetaffinity(0, &set) })
	if set.Count() != len(cpus) || sc.Shard(0).Stats().Core != -1 {
		t.Fatalf("an unpinned shard runs on %d of %d CPUs", set.Count(), len(cpus))
	}
}
