//go:build !linux

package sched

import "errors"

var errPinUnsupported = errors.New("thread pinning needs Linux")

// pinThread fails: sched_setaffinity is Linux-only.
func pinThread(int) error { return errPinUnsupported }

// allowedCPUs fails, so Config.Validate rejects Pin.
func allowedCPUs() ([]int, error) { return nil, errPinUnsupported }
