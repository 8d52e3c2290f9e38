package test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"sluice/client"
)

// idLoad is a producer writing produceIDs' records (ids 0, 1, ... in order) from a
// goroutine of its own until stopped: the load under which the cluster tests inject
// their faults, so that a fault lands while records are in flight (buffered in the
// producer, accepted but not yet on HDFS), not between two WaitPersisted calls.
type idLoad struct {
	sent   atomic.Int64 // ids Produce has taken so far
	stop   chan struct{}
	done   chan struct{} // closed when the goroutine ended, err set
	err    error
	cancel context.CancelFunc
}

// loadPace is how many records the load writes between two pauses of a millisecond: a
// steady few thousand records a second at most, not a flood that drowns two shared
// cores (and that the read-back at the end would take long to check).
const loadPace = 5

// startIDLoad starts an idLoad on topic through the brokers at addrs. The test's end
// stops it if the test did not (finish).
func startIDLoad(t testing.TB, topic string, addrs ...string) *idLoad {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	p, err := client.NewProducer(ctx, topic, client.Brokers(addrs...), client.Linger(time.Millisecond))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	l := &idLoad{stop: make(chan struct{}), done: make(chan struct{}), cancel: cancel}
	go func() {
		l.err = l.run(ctx, p)
		close(l.done)
	}()
	t.Cleanup(func() {
		l.cancel()
		l.halt()
		<-l.done
	})
	return l
}

// run produces until stop, then waits until every record is persisted.
func (l *idLoad) run(ctx context.Context, p *client.Producer) error {
	defer p.Close(context.Background())
	for i := 0; ; i++ {
		select {
		case <-l.stop:
			if err := p.WaitPersisted(ctx); err != nil {
				return fmt.Errorf("records 0..%d not persisted: %w", i, err)
			}
			return nil
		default:
		}
		if err := p.Produce(ctx, idRecord(i)); err != nil {
			return fmt.Errorf("produce %d: %w", i, err)
		}
		l.sent.Store(int64(i + 1))
		if i%loadPace == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}

// halt tells the load to stop (once).
func (l *idLoad) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
}

// waitSent waits until the load has produced n records more than it had when called
// (Produce took them: they may be only buffered).
func (l *idLoad) waitSent(t testing.TB, what string, n int64) {
	t.Helper()
	from := l.sent.Load()
	waitFor(t, what, func() bool {
		select {
		case <-l.done:
			t.Fatalf("the load ended while waiting for %s: %v", what, l.err)
		default:
		}
		return l.sent.Load() >= from+n
	})
}

// finish stops the load, waits until everything it produced is persisted and returns
// how many ids it produced.
func (l *idLoad) finish(t testing.TB) int {
	t.Helper()
	l.halt()
	<-l.done
	if l.err != nil {
		t.Fatalf("load: %v", l.err)
	}
	n := int(l.sent.Load())
	t.Logf("the load produced %d records", n)
	return n
}
