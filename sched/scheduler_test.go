package sched

import (
	"slices"
	"strings"
	"testing"
	"time"

	"sluice/internal/invariants"
)

func TestShardForStableAndSpread(t *testing.T) {
	a := start(t, Config{Shards: 8})
	b := start(t, Config{Shards: 8})
	const keys = 80000
	counts := make([]int, 8)
	for k := range uint64(keys) {
		s := a.ShardFor(k)
		if s != a.ShardFor(k) || s.ID() != b.ShardFor(k).ID() {
			t.Fatalf("key %d maps to different shards", k)
		}
		counts[s.ID()]++
	}
	mean := keys / 8
	for i, n := range counts {
		if n < mean*9/10 || n > mean*11/10 {
			t.Fatalf("shard %d got %d of %d sequential keys (counts %v)", i, n, keys, counts)
		}
	}
	again := make([]int, 8)
	for k := range uint64(keys) {
		again[shardIndex(k, 8)]++
	}
	if !slices.Equal(again, counts) {
		t.Fatalf("shardIndex not deterministic: the same keys counted %v, then %v", counts, again)
	}
	for k := range uint64(1000) {
		if i := shardIndex(k*0x9e3779b97f4a7c15, 3); i < 0 || i >= 3 {
			t.Fatalf("shardIndex out of range: %d", i)
		}
	}
}

func TestSubmitNoAllocs(t *testing.T) {
	sc := start(t, Config{Shards: 1, QueueLen: 1 << 12})
	s := sc.Shard(0)
	task := &record{logs: make([][][2]int, 1)}
	do(t, s, func(*Shard) { task.logs[0] = make([][2]int, 0, 2000) })
	allocs := testing.AllocsPerRun(1000, func() { submitRetry(t, s, task) })
	if allocs != 0 {
		t.Fatalf("Submit: %v allocs", allocs)
	}
}

// TestShardOnlyMethodsChecked: under the invariants tag, Every, After,
// OnClose and Timer.Stop panic off the shard goroutine once it runs.
func TestShardOnlyMethodsChecked(t *testing.T) {
	if !invariants.Enabled {
		t.Skip("needs -tags invariants")
	}
	sc := start(t, Config{Shards: 1})
	s := sc.Shard(0)
	mustPanic := func(name string, fn func()) {
		t.Helper()
		defer func() {
			r := recover()
			if msg, _ := r.(string); !strings.HasPrefix(msg, "BUG: sched: "+name) {
				t.Errorf("%s off the shard goroutine: recovered %v", name, r)
			}
		}()
		fn()
	}
	var tm Timer
	do(t, s, func(s *Shard) { tm = s.After(0, func(_ time.Time) {}) })
	mustPanic("Shard.Every", func() { s.Every(1, "x", func(time.Time) {}) })
	mustPanic("Shard.After", func() { s.After(1, func(time.Time) {}) })
	mustPanic("Shard.OnClose", func() { s.OnClose(func() {}) })
	mustPanic("Timer.Stop", func() { tm.Stop() })
	var inner any
	do(t, s, func(*Shard) {
		defer func() { inner = recover() }()
		sc.Close()
	})
	if msg, _ := inner.(string); !strings.Contains(msg, "Scheduler.Close called from shard 0") {
		t.Fatalf("Close from the shard: recovered %v", inner)
	}
}
