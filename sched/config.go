package sched

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Defaults applied by Config.EnsureDefaults.
const (
	DefaultQueueLen     = 4096
	DefaultTickInterval = time.Millisecond
)

// Limits checked by Config.Validate.
const (
	MaxShards       = 1024
	MaxQueueLen     = 1 << 20
	MinTickInterval = 10 * time.Microsecond
	MaxTickInterval = time.Second
	// maxCore is the size of the kernel's CPU set as x/sys/unix sees it.
	maxCore = 1024
)

// Config sizes a Scheduler. The zero value is not valid; call EnsureDefaults
// first (New does). The names in messages (sched.shards, ...) are the keys
// operators write in the broker's config file.
type Config struct {
	// Shards is how many shard goroutines run (sched.shards); default
	// runtime.GOMAXPROCS(0). Changing it moves partitions between shards.
	Shards int
	// QueueLen bounds the tasks waiting in one shard's queue
	// (sched.queue_len); past it Submit returns ErrBusy. While the shard
	// runs one drained batch, another QueueLen may queue behind it.
	QueueLen int
	// Pin locks each shard goroutine to an OS thread and that thread to
	// Cores[shard] (sched.pin). Off by default: waking a locked thread costs
	// a futex hand-off, two orders of magnitude slower than waking an ordinary
	// goroutine (DESIGN §7, BenchmarkHandoff).
	Pin bool
	// Cores is the CPU of each shard when Pin is set (sched.cores), one per
	// shard; two shards may share a core. Default: the CPUs this process may
	// run on, in order, reused round robin. Ignored unless Pin is set.
	Cores []int
	// TickInterval is the resolution of timers (sched.tick): deadlines are
	// rounded up to a multiple of it, so timers due in the same tick run in
	// one wake-up and a timer fires late by up to one tick, never early.
	TickInterval time.Duration
}

// EnsureDefaults fills zero fields with the defaults and returns c. With Pin
// set and no Cores it reads the process's CPU affinity.
func (c *Config) EnsureDefaults() *Config {
	if c.Shards == 0 {
		c.Shards = runtime.GOMAXPROCS(0)
	}
	if c.QueueLen == 0 {
		c.QueueLen = DefaultQueueLen
	}
	if c.TickInterval == 0 {
		c.TickInterval = DefaultTickInterval
	}
	if c.Pin && len(c.Cores) == 0 && c.Shards > 0 {
		if cpus, err := allowedCPUs(); err == nil && len(cpus) > 0 {
			c.Cores = make([]int, c.Shards)
			for i := range c.Cores {
				c.Cores[i] = cpus[i%len(cpus)]
			}
		}
	}
	return c
}

// Validate reports every problem with c, one per line, or nil.
func (c *Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Shards < 1 || c.Shards > MaxShards {
		add("sched.shards %d must be from 1 to %d", c.Shards, MaxShards)
	}
	if c.QueueLen < 1 || c.QueueLen > MaxQueueLen {
		add("sched.queue_len %d must be from 1 to %d", c.QueueLen, MaxQueueLen)
	}
	if c.TickInterval < MinTickInterval || c.TickInterval > MaxTickInterval {
		add("sched.tick %v must be from %v to %v", c.TickInterval, MinTickInterval, MaxTickInterval)
	}
	if c.Pin {
		c.validateCores(add)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("invalid sched config: %w", errors.Join(errs...))
}

func (c *Config) validateCores(add func(string, ...any)) {
	if len(c.Cores) != c.Shards {
		add("sched.cores lists %d cores for %d shards", len(c.Cores), c.Shards)
	}
	cpus, err := allowedCPUs()
	if err != nil {
		add("sched.pin: %v", err)
		return
	}
	allowed := make(map[int]bool, len(cpus))
	for _, cpu := range cpus {
		allowed[cpu] = true
	}
	for _, core := range c.Cores {
		if core < 0 || core >= maxCore || !allowed[core] {
			add("sched.cores: core %d is not one this process may run on (%s)", core, formatInts(cpus))
		}
	}
}

// String formats c as the config keys an operator would write.
func (c Config) String() string {
	s := "sched.shards=" + strconv.Itoa(c.Shards) +
		" sched.queue_len=" + strconv.Itoa(c.QueueLen) +
		" sched.pin=" + strconv.FormatBool(c.Pin)
	if c.Pin {
		s += " sched.cores=" + formatInts(c.Cores)
	}
	return s + " sched.tick=" + c.TickInterval.String()
}

func formatInts(xs []int) string {
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(x))
	}
	return b.String()
}
