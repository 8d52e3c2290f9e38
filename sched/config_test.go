package sched

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	var c Config
	c.EnsureDefaults()
	want := Config{Shards: runtime.GOMAXPROCS(0), QueueLen: DefaultQueueLen, TickInterval: DefaultTickInterval}
	if c.String() != want.String() || c.Pin || c.Cores != nil {
		t.Fatalf("defaults %v, want %v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigDefaultCores(t *testing.T) {
	cpus, err := allowedCPUs()
	if err != nil {
		t.Skip(err)
	}
	c := Config{Shards: len(cpus) + 1, Pin: true}
	c.EnsureDefaults()
	if len(c.Cores) != c.Shards || c.Cores[0] != cpus[0] || c.Cores[len(cpus)] != cpus[0] {
		t.Fatalf("cores %v for shards %d on cpus %v", c.Cores, c.Shards, cpus)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(c.String(), "sched.pin=true sched.cores="+formatInts(c.Cores)) {
		t.Fatalf("String() = %q", c.String())
	}
}

func TestConfigValidate(t *testing.T) {
	ok := func() Config { return *(&Config{Shards: 2}).EnsureDefaults() }
	f := func(name, want string, edit func(*Config)) {
		t.Helper()
		c := ok()
		edit(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Validate() = %v, want %q", name, err, want)
		}
	}
	f("no shards", "sched.shards 0", func(c *Config) { c.Shards = 0 })
	f("too many shards", "sched.shards", func(c *Config) { c.Shards = MaxShards + 1 })
	f("no queue", "sched.queue_len -1", func(c *Config) { c.QueueLen = -1 })
	f("huge queue", "sched.queue_len", func(c *Config) { c.QueueLen = MaxQueueLen + 1 })
	f("fast tick", "sched.tick 1µs", func(c *Config) { c.TickInterval = time.Microsecond })
	f("slow tick", "sched.tick 1m0s", func(c *Config) { c.TickInterval = time.Minute })
	f("cores short", "lists 1 cores for 2 shards", func(c *Config) { c.Pin, c.Cores = true, []int{0} })
	f("bad core", "core 1023 is not", func(c *Config) { c.Pin, c.Cores = true, []int{0, 1023} })
	f("negative core", "core -1 is not", func(c *Config) { c.Pin, c.Cores = true, []int{-1, 0} })
}

func TestConfigValidateReportsAll(t *testing.T) {
	c := Config{Shards: -1, QueueLen: -1, TickInterval: -1}
	err := c.Validate()
	if err == nil || strings.Count(err.Error(), "\n") != 2 {
		t.Fatalf("Validate() = %v, want three problems", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	if _, err := New(Config{QueueLen: -5}); err == nil {
		t.Fatal("New accepted queue_len -5")
	}
}

func TestNewKeepsCallerCores(t *testing.T) {
	cores := []int{0}
	sc, err := New(Config{Shards: 1, Pin: true, Cores: cores})
	if err != nil {
		t.Skip(err) // core 0 not allowed here
	}
	got := sc.Config()
	got.Cores[0] = 99
	if cores[0] != 0 || sc.Config().Cores[0] != 0 {
		t.Fatal("Config shares the Cores slice")
	}
}
