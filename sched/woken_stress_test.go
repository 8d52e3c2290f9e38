package sched

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// wokenCount locks every mailbox and compares nWoken with the marks.
func wokenCount(t *testing.T, sc *Scheduler) (int32, int32) {
	for _, s := range sc.shards {
		s.mb.mu.Lock()
	}
	var marks int32
	for _, s := range sc.shards {
		if s.mb.mu.woken {
			marks++
		}
	}
	n := sc.nWoken.Load()
	for _, s := range sc.shards {
		s.mb.mu.Unlock()
	}
	return n, marks
}

// TestWokenCountMatchesMarks: Submit, TryRun setting earlier timers, HandOff, from
// many goroutines, then Close; nWoken always equals the marks, and is 0 once quiet
// and after Close.
func TestWokenCountMatchesMarks(t *testing.T) {
	for round := range 20 {
		sc, err := New(Config{Shards: 4, QueueLen: 16})
		if err != nil {
			t.Fatal(err)
		}
		if err := sc.Start(); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for g := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(g), uint64(round)))
				for {
					select {
					case <-stop:
						return
					default:
					}
					s := sc.Shard(rng.IntN(4))
					switch rng.IntN(4) {
					case 0:
						_ = s.SubmitFunc(func(*Shard) {})
					case 1:
						s.TryRun(func(s *Shard) {
							s.After(time.Duration(rng.IntN(200))*time.Microsecond, func(time.Time) {})
						})
					case 2:
						sc.HandOff()
					case 3:
						time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
					}
				}
			}()
		}
		for range 50 {
			time.Sleep(time.Millisecond)
			if n, marks := wokenCount(t, sc); n != marks {
				t.Fatalf("round %d: nWoken %d, marks %d", round, n, marks)
			}
		}
		if round%2 == 0 {
			close(stop)
			wg.Wait()
			waitFor(t, "quiet", func() bool { n, m := wokenCount(t, sc); return n == 0 && m == 0 })
			sc.Close()
		} else {
			sc.Close() // while submitters run
			close(stop)
			wg.Wait()
		}
		if n, marks := wokenCount(t, sc); n != marks || n != 0 {
			t.Fatalf("round %d after Close: nWoken %d, marks %d", round, n, marks)
		}
	}
}
