package test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"sluice/client"
)

// TestClusterConsumerOutlivesBroker: two brokers serve a topic's four partitions, and a
// consumer reads them all. kill -9 of one broker must not stall the consumer: the records
// written to the survivor's partitions after the kill are read while the dead broker still
// owns its partitions (its ZooKeeper session, 10 s, has not expired, so the admin has not
// moved them). Once they move to the survivor the consumer reads them there too, from
// where it stopped: every record, before and after the kill, exactly once and in order
// per key, by the one consumer that ran through it all.
func TestClusterConsumerOutlivesBroker(t *testing.T) {
	w := startTwoBrokerWrite(t, "o")
	b1, b2 := w.brokers[0], w.brokers[1]
	const before, after = 2000, 2000
	// Persisted before the kill: nothing the dead broker acknowledged is lost with it, so
	// no record the consumer read comes back at another offset.
	w.produce(t, 0, before)
	w.persisted(t)
	r := startIDReader(t, "o", b1.Addr, b2.Addr)
	waitFor(t, "the records before the kill read", func() bool { return r.count(0) == before })
	b1.Kill()
	w.produce(t, before, before+after) // those of b1's partitions wait in the producer
	waitFor(t, "records written after the kill read from the survivor", func() bool { return r.count(before) >= 100 })
	if m := servedBy(owners(t, b2.Addr, "o")); m[b2.Addr] != 2 {
		t.Fatalf("the records written after the kill were read only once the dead broker's partitions had moved (%v): the consumer stalled while one broker was down", m)
	}
	waitFor(t, "the dead broker's partitions on the survivor", func() bool {
		return servedBy(owners(t, b2.Addr, "o"))[b2.Addr] == 4
	})
	w.persisted(t)
	waitFor(t, "every record read", func() bool { return r.count(0) >= before+after })
	r.check(t, before+after)
}

// TestClusterBrokerPaused: TestClusterConsumerOutlivesBroker with the broker paused
// (SIGSTOP: a hung process; its connections stay open, the kernel even accepts new ones,
// and nothing answers) instead of killed. Its session (10 s) expires and its partitions
// move to the survivor. One producer writes throughout, some of its requests to the
// paused broker in flight when it stopped; one consumer reads throughout. Both must
// carry on at the survivor: every record written is persisted and read exactly once
// while the broker is still paused. Their connections to the paused broker wait for
// answers that never come: they fail at their answer timeouts (the long poll's wait plus
// twice the dial timeout) and the clients ask the metadata where the partitions are
// (without those timeouts both waited for good).
func TestClusterBrokerPaused(t *testing.T) {
	w := startTwoBrokerWrite(t, "pz")
	b1, b2 := w.brokers[0], w.brokers[1]
	const before, during, after = 1000, 500, 1000
	w.produce(t, 0, before)
	w.persisted(t)
	r := startIDReader(t, "pz", b1.Addr, b2.Addr)
	waitFor(t, "the records before the pause read", func() bool { return r.count(0) == before })
	resume := pause(t, b1)
	defer resume()
	w.produce(t, before, before+during) // those of the paused broker's partitions go unanswered
	waitFor(t, "the paused broker's partitions on the survivor", func() bool {
		return servedBy(owners(t, b2.Addr, "pz"))[b2.Addr] == 4
	})
	w.produce(t, before+during, before+during+after)
	w.persisted(t)
	const n = before + during + after
	waitFor(t, "every record read while the broker is paused", func() bool { return r.count(0) >= n })
	r.check(t, n)
}

// twoBrokerWrite is a cluster of two brokers (ZooKeeper sessions of 10 s) serving a
// topic of four partitions, and a producer of spreadRecords to it that knows only the
// second broker (the first is the one the tests stop).
type twoBrokerWrite struct {
	*cluster
	ctx context.Context
	p   *client.Producer
}

func startTwoBrokerWrite(t *testing.T, topic string) *twoBrokerWrite {
	t.Helper()
	c := startClusterSession(t, 2, 10*time.Second)
	c.createTopic(t, topic, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	p, err := client.NewProducer(ctx, topic, client.Brokers(c.brokers[1].Addr), client.Linger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	return &twoBrokerWrite{cluster: c, ctx: ctx, p: p}
}

// produce hands ids [from, to) to the producer.
func (w *twoBrokerWrite) produce(t *testing.T, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := w.p.Produce(w.ctx, spreadRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
}

// persisted waits until every record produced is persisted.
func (w *twoBrokerWrite) persisted(t *testing.T) {
	t.Helper()
	if err := w.p.WaitPersisted(w.ctx); err != nil {
		t.Fatalf("records not persisted: %v", err)
	}
}

// spreadRecord is the record of id i, its value as idRecord's, its key one of 101: every
// partition of a few gets some of them.
func spreadRecord(i int) *client.Record {
	r := idRecord(i)
	r.Key = []byte(fmt.Sprint(i % 101))
	return r
}

// idReader is a consumer reading a topic from its oldest record in the background,
// counting each id it reads (values as idRecord's) and checking the order per key.
type idReader struct {
	mu   sync.Mutex
	seen map[int]int
	last map[string]int
	err  error
}

// startIDReader starts an idReader on topic through the brokers at addrs; the test's end
// stops it.
func startIDReader(t testing.TB, topic string, addrs ...string) *idReader {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c, err := client.NewConsumer(ctx, topic, client.Brokers(addrs...), client.Start(client.Oldest()),
		client.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r := &idReader{seen: map[int]int{}, last: map[string]int{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if err := c.Poll(ctx); err != nil {
				if !errors.Is(err, context.Canceled) {
					r.fail(fmt.Errorf("poll: %w", err))
				}
				return
			}
			for c.Next() {
				r.take(c.Record().Key, c.Record().Value)
			}
			if err := c.Err(); err != nil {
				r.fail(err)
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		c.Close()
	})
	return r
}

func (r *idReader) take(key, value []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(value) != 64 {
		r.err = fmt.Errorf("a record of %d bytes was never produced", len(value))
		return
	}
	id := int(binary.LittleEndian.Uint64(value))
	if prev, ok := r.last[string(key)]; ok && id <= prev && r.err == nil {
		r.err = fmt.Errorf("key %s: record %d after %d", key, id, prev)
	}
	r.last[string(key)] = id
	r.seen[id]++
}

func (r *idReader) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
	}
}

// count returns how many records with ids from on it read.
func (r *idReader) count(from int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for id, k := range r.seen {
		if id >= from {
			n += k
		}
	}
	return n
}

// check fails the test unless ids [0, n) were each read exactly once, in order per key,
// and nothing else.
func (r *idReader) check(t testing.TB, n int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		t.Fatal(r.err)
	}
	for id := range n {
		if k := r.seen[id]; k != 1 {
			t.Fatalf("record %d read %d times, want once", id, k)
		}
	}
	if len(r.seen) != n {
		t.Fatalf("%d distinct ids read, want %d", len(r.seen), n)
	}
}
