package nanosleep

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// TestSleeperSleeps: a Sleeper sleeps at least what it is asked, again and again (the
// timer re-armed each time), from several goroutines each with its own Sleeper, and
// returns at once for nothing; the overshoot is logged (speed lives in benchmarks).
func TestSleeperSleeps(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Go(func() {
			s, err := NewSleeper()
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			var over []time.Duration
			for _, d := range []time.Duration{200 * time.Microsecond, 50 * time.Microsecond, time.Millisecond, 0, -time.Second} {
				for range 20 {
					t0 := time.Now()
					s.Sleep(d)
					took := time.Since(t0)
					if took < d {
						t.Errorf("goroutine %d: Sleep(%v) took %v", g, d, took)
					}
					if d <= 0 && took > 50*time.Millisecond {
						t.Errorf("goroutine %d: Sleep(%v) took %v", g, d, took)
					}
					if d > 0 {
						over = append(over, took-d)
					}
				}
			}
			slices.Sort(over)
			t.Logf("goroutine %d: overshoot p50 %v, max %v", g, over[len(over)/2], over[len(over)-1])
		})
	}
	wg.Wait()
}

// BenchmarkSleep200us compares the overshoot of a 200 µs sleep: nanosleep(2) against a
// Sleeper (ns/op is the whole sleep).
func BenchmarkSleep200us(b *testing.B) {
	const d = 200 * time.Microsecond
	b.Run("nanosleep", func(b *testing.B) {
		for b.Loop() {
			Sleep(d)
		}
	})
	b.Run("sleeper", func(b *testing.B) {
		s, err := NewSleeper()
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		for b.Loop() {
			s.Sleep(d)
		}
	})
}

// TestSleeperWithoutTimerfd: the Sleeper NewSleeper returns where the kernel gives no
// timerfd (no file) sleeps with nanosleep(2), and closes without error.
func TestSleeperWithoutTimerfd(t *testing.T) {
	var s Sleeper
	const d = 300 * time.Microsecond
	t0 := time.Now()
	s.Sleep(d)
	if took := time.Since(t0); took < d {
		t.Fatalf("Sleep(%v) took %v", d, took)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
