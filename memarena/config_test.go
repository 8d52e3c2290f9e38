package memarena

import (
	"strings"
	"testing"
)

func TestConfigDefaults(t *testing.T) {
	var c Config
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	want := "arena.size=1GiB arena.chunk_size=64KiB arena.slab_size=64MiB arena.low_watermark=0.05 " +
		"arena.high_watermark=0.1 arena.partition_min=0B arena.partition_max=1GiB arena.prefault=false"
	if got := c.String(); got != want {
		t.Errorf("String() = %q\nwant %q", got, want)
	}
	c = Config{LowWatermark: 0.2}
	c.EnsureDefaults()
	if c.HighWatermark <= c.LowWatermark {
		t.Errorf("high watermark %v not above low %v", c.HighWatermark, c.LowWatermark)
	}
}

func TestConfigValidate(t *testing.T) {
	defer func(f func() (int64, error)) { physicalMemory = f }(physicalMemory)
	physicalMemory = func() (int64, error) { return 25125007360, nil } // 23.4GiB
	f := func(mod func(*Config), wantErr string) {
		t.Helper()
		c := Config{}
		c.EnsureDefaults()
		mod(&c)
		err := c.Validate()
		switch {
		case wantErr == "" && err != nil:
			t.Errorf("Validate(%v) = %v", c, err)
		case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
			t.Errorf("Validate(%v) = %v; want it to contain %q", c, err, wantErr)
		}
	}
	f(func(c *Config) {}, "")
	f(func(c *Config) { c.Size, c.PartitionMax = 40*GiB, 40*GiB }, "arena.size 40GiB exceeds physical memory 23.4GiB")
	f(func(c *Config) { c.Size = -1 }, "arena.size -1B must be positive")
	f(func(c *Config) { c.ChunkSize = 3000 }, "arena.chunk_size 3000B must be a power of two from 4KiB to 16MiB")
	f(func(c *Config) { c.ChunkSize = 2 * KiB }, "arena.chunk_size 2KiB must be a power of two")
	f(func(c *Config) { c.ChunkSize = 32 * MiB }, "arena.chunk_size 32MiB must be a power of two")
	f(func(c *Config) { c.Size = GiB + 4*KiB }, "arena.size 1048580KiB is not a multiple of arena.chunk_size 64KiB")
	f(func(c *Config) { c.SlabSize = 32 * KiB }, "arena.slab_size 32KiB must be a power of two from arena.chunk_size 64KiB")
	f(func(c *Config) { c.SlabSize = 2 * GiB }, "arena.slab_size 2GiB must be a power of two")
	f(func(c *Config) { c.Size, c.PartitionMax, c.SlabSize = 16*GiB, 16*GiB, 64*KiB }, "arena.slab_size 64KiB cuts arena.size 16GiB into more than 65536 slabs")
	f(func(c *Config) { c.LowWatermark, c.HighWatermark = 0.3, 0.2 }, "arena.low_watermark 0.3 must be below arena.high_watermark 0.2")
	f(func(c *Config) { c.HighWatermark = 1.5 }, "arena.high_watermark 1.5 must be above 0 and at most 1")
	f(func(c *Config) { c.LowWatermark = -0.1 }, "arena.low_watermark -0.1 must be from 0")
	f(func(c *Config) { c.PartitionMax = 2 * GiB }, "arena.partition_max 2GiB exceeds arena.size 1GiB")
	f(func(c *Config) { c.PartitionMax = 4 * KiB }, "arena.partition_max 4KiB is below arena.chunk_size 64KiB")
	f(func(c *Config) { c.PartitionMax = 100 * KiB }, "arena.partition_max 100KiB is not a multiple of arena.chunk_size 64KiB")
	f(func(c *Config) { c.PartitionMin = 2 * GiB }, "arena.partition_min 2GiB exceeds arena.partition_max 1GiB")
	f(func(c *Config) { c.PartitionMin = -1 }, "arena.partition_min -1B must not be negative")
}

func TestConfigValidateReportsAll(t *testing.T) {
	c := Config{Size: 3000, ChunkSize: 3000, SlabSize: 3000, LowWatermark: 0.5, HighWatermark: 0.4, PartitionMax: 1}
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate accepted a bad config")
	}
	for _, want := range []string{"arena.chunk_size", "arena.low_watermark", "arena.partition_max"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	if _, err := New(Config{ChunkSize: 1000}); err == nil {
		t.Fatal("New accepted chunk size 1000")
	}
}
