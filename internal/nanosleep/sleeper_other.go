//go:build !linux

package nanosleep

import "time"

// Sleeper is Sleep where timerfd(2) is not at hand.
type Sleeper struct{}

// NewSleeper returns a Sleeper (never an error here).
func NewSleeper() (*Sleeper, error) { return &Sleeper{}, nil }

// Sleep sleeps d.
func (s *Sleeper) Sleep(d time.Duration) { Sleep(d) }

// Close does nothing.
func (s *Sleeper) Close() error { return nil }
