package sched

import (
	"runtime"
	"sync"
	"testing"
)

// ping is a pooled request: the shard runs it and answers on done.
type ping struct{ done chan struct{} }

func (p *ping) Run(*Shard) { p.done <- struct{}{} }

// BenchmarkChanRoundTrip is the ceiling for a hand-off: a ping-pong between
// two ordinary goroutines over unbuffered channels (DESIGN §7: ≈ 0.26 µs).
func BenchmarkChanRoundTrip(b *testing.B) {
	b.ReportAllocs()
	req, resp := make(chan struct{}), make(chan struct{})
	go func() {
		for range req {
			resp <- struct{}{}
		}
	}()
	for b.Loop() {
		req <- struct{}{}
		<-resp
	}
	close(req)
}

// BenchmarkSubmitRoundTrip is a request handed to an idle shard and its
// answer handed back: Submit, wake the shard, Run, wake the submitter.
func BenchmarkSubmitRoundTrip(b *testing.B) {
	sc := start(b, Config{Shards: 1})
	benchRoundTrip(b, sc.Shard(0))
}

func benchRoundTrip(b *testing.B, s *Shard) {
	b.ReportAllocs()
	p := &ping{done: make(chan struct{}, 1)}
	for b.Loop() {
		if err := s.Submit(p); err != nil {
			b.Fatal(err)
		}
		<-p.done
	}
}

// BenchmarkHandoff compares the round trip with the shard unpinned, pinned
// (LockOSThread + affinity), and pinned with the submitter pinned too, as a
// locked event loop would be. DESIGN §7 predicts pinning loses.
func BenchmarkHandoff(b *testing.B) {
	cpus, _ := allowedCPUs()
	b.Run("unpinned", func(b *testing.B) {
		benchRoundTrip(b, start(b, Config{Shards: 1}).Shard(0))
	})
	if len(cpus) < 2 {
		b.Skip("pinned hand-offs need two CPUs")
	}
	pinned := Config{Shards: 1, Pin: true, Cores: []int{cpus[1]}}
	b.Run("pinned-shard", func(b *testing.B) {
		benchRoundTrip(b, start(b, pinned).Shard(0))
	})
	b.Run("pinned-both", func(b *testing.B) {
		s := start(b, pinned).Shard(0)
		onPinnedThread(b, cpus[0], func() { benchRoundTrip(b, s) })
	})
}

// onPinnedThread runs fn on a goroutine locked to a thread pinned to core.
// The goroutine exits still locked, so the runtime retires the thread.
func onPinnedThread(b *testing.B, core int, fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := pinThread(core); err != nil {
			b.Error(err)
			return
		}
		fn()
	}()
	<-done
}

// count is a task that bumps a counter only its shard touches.
type count struct{ n *int }

func (c count) Run(*Shard) { *c.n++ }

// BenchmarkDrain is throughput: 4 producers submit b.N tasks in all to one
// shard as fast as it takes them, retrying on ErrBusy. It reports tasks per
// drained batch and busy refusals per task.
func BenchmarkDrain(b *testing.B) {
	b.Run("unpinned", func(b *testing.B) { benchDrain(b, Config{Shards: 1}) })
	cpus, _ := allowedCPUs()
	if len(cpus) < 2 {
		b.Skip("pinned drain needs two CPUs")
	}
	b.Run("pinned", func(b *testing.B) {
		benchDrain(b, Config{Shards: 1, Pin: true, Cores: []int{cpus[1]}})
	})
}

func benchDrain(b *testing.B, cfg Config) {
	const producers = 4
	b.ReportAllocs()
	sc := start(b, cfg)
	s := sc.Shard(0)
	var n int
	task := count{&n}
	before := s.Stats()
	b.ResetTimer()
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for range b.N/producers + min(p, b.N%producers) {
				for s.Submit(task) != nil {
					runtime.Gosched()
				}
			}
		})
	}
	wg.Wait()
	do(b, s, func(*Shard) {})
	b.StopTimer()
	after := s.Stats()
	if batches := after.Batches - before.Batches; batches > 0 {
		b.ReportMetric(float64(after.TasksRun-before.TasksRun)/float64(batches), "tasks/batch")
	}
	b.ReportMetric(float64(after.Busy-before.Busy)/float64(b.N), "busy/op")
}
