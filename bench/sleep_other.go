//go:build !linux

package bench

import "time"

// preciseSleep is time.Sleep where nanosleep(2) is not at hand.
func preciseSleep(d time.Duration) { time.Sleep(d) }
