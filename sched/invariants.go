package sched

import (
	"bytes"
	"runtime"
	"strconv"

	"sluice/internal/invariants"
)

// goid returns the calling goroutine's id, parsed from its stack header
// ("goroutine 42 [running]:"). It costs about a microsecond, so it is used
// only under the invariants build tag and in tests.
func goid() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		panic("BUG: sched: cannot parse goroutine id from " + strconv.Quote(string(buf[:])))
	}
	return id
}

// checkOwner panics, under the invariants build tag, when a shard-only
// method is called off the shard goroutine after Start, other than by a
// function TryRun runs.
func (s *Shard) checkOwner(method string) {
	if !invariants.Enabled {
		return
	}
	me := goid()
	if owner := s.goid.Load(); owner != 0 && owner != me && s.inline.Load() != me {
		panic("BUG: sched: " + method + " called off shard " + strconv.Itoa(s.id) + "'s goroutine")
	}
}

// enterInline records, under the invariants build tag, that the calling
// goroutine runs the shard's work (TryRun); exitInline ends it.
func (s *Shard) enterInline() {
	if invariants.Enabled {
		s.inline.Store(goid())
	}
}

func (s *Shard) exitInline() {
	if invariants.Enabled {
		s.inline.Store(0)
	}
}

// checkNotShard panics, under the invariants build tag, when Close is called
// from a shard goroutine or from a function TryRun runs, which would wait for
// itself forever.
func (sc *Scheduler) checkNotShard() {
	if !invariants.Enabled {
		return
	}
	me := goid()
	for _, s := range sc.shards {
		if s.goid.Load() == me || s.inline.Load() == me {
			panic("BUG: sched: Scheduler.Close called from shard " + strconv.Itoa(s.id) + "'s goroutine")
		}
	}
}

// shardGoid is the id a shard goroutine records: its own under the
// invariants tag, else 0, which disables checkOwner.
func shardGoid() int64 {
	if invariants.Enabled {
		return goid()
	}
	return 0
}
