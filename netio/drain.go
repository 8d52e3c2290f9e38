package netio

import (
	"context"
	"sync/atomic"
	"time"

	"sluice/wire"
)

// Draining. A broker that stops makes everything it accepted durable and answers what is
// parked before it closes connections, so a producer waiting for durability hears its
// final checkpoint rather than a closed connection. Drain stops new requests (each is
// answered not_serving at once: the client retries elsewhere or after the restart) and
// returns once no handler runs; the owner then finishes its work, whose answers go out
// on the open connections; Flushed waits until they are written; Stop closes.

// drainState is the server's side of Drain.
type drainState struct {
	// draining is set by Drain; handling counts handlers running. A loop adds itself to
	// handling before it reads draining and Drain sets draining before it reads
	// handling (both sequentially consistent), so once Drain has seen handling at zero
	// no handler runs and none will start.
	draining atomic.Bool
	handling atomic.Int64
}

// Drain answers every request read from now on with not_serving and returns once no
// request handler is running: after it, the handler is never called again. Any goroutine.
func (s *Server) Drain() {
	s.drain.draining.Store(true)
	for s.drain.handling.Load() != 0 {
		time.Sleep(100 * time.Microsecond)
	}
}

// Flushed waits until every answer given to a connection has been written out (or its
// connection closed), or ctx ends. Use it after Drain, before Stop.
func (s *Server) Flushed(ctx context.Context) error {
	for s.outBudget.queued.Load() != 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// enter reports whether a request may be handled now; when it returns true the caller
// calls leave once the handler returns. Loop only.
func (s *Server) enter() bool {
	s.drain.handling.Add(1)
	if s.drain.draining.Load() {
		s.drain.handling.Add(-1)
		return false
	}
	return true
}

func (s *Server) leave() { s.drain.handling.Add(-1) }

// errDraining answers requests that arrive while the server drains.
var errDraining = wire.NewError(wire.CodeNotServing, "the broker is shutting down")
