//go:build !linux

package nanosleep

import "time"

// Sleep is time.Sleep where nanosleep(2) is not at hand.
func Sleep(d time.Duration) { time.Sleep(d) }
