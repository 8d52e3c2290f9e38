package sched

import "errors"

var (
	// ErrBusy: the shard's queue is full. Submit returns it at once, never
	// waiting; the caller answers "busy, retry after" (a throttle, not a
	// failure) and the shard keeps draining.
	ErrBusy = errors.New("sched: shard queue full")
	// ErrClosed: the scheduler is closing or closed and accepts no more
	// tasks. Tasks accepted before Close still run.
	ErrClosed = errors.New("sched: closed")
	// ErrPin: a shard goroutine could not be pinned to its core; Start wraps
	// it with the shard and the cause. The shard runs on, locked to
	// its thread but on any core.
	ErrPin = errors.New("sched: cannot pin shard")
)
