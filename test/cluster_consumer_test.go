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
	c := startClusterSession(t, 2, 10*time.Second)
	b1, b2 := c.brokers[0], c.brokers[1]
	c.createTopic(t, "o", 4)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := client.NewProducer(ctx, "o", client.Brokers(b2.Addr), client.Linger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	const before, after = 2000, 2000
	// Persisted before the kill: nothing the dead broker acknowledged is lost with it, so
	// no record the consumer read comes back at another offset.
	for i := range before {
		if err := p.Produce(ctx, spreadRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.WaitPersisted(ctx); err != nil {
		t.Fatal(err)
	}
	r := startIDReader(t, "o", b1.Addr, b2.Addr)
	waitFor(t, "the records before the kill read", func() bool { return r.count(0) == before })
	b1.Kill()
	for i := before; i < before+after; i++ { // those of b1's partitions wait in the producer
		if err := p.Produce(ctx, spreadRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "records written after the kill read from the survivor", func() bool { return r.count(before) >= 100 })
	if m := servedBy(owners(t, b2.Addr, "o")); m[b2.Addr] != 2 {
		t.Fatalf("the records written after the kill were read only once the dead broker's partitions had moved (%v): the consumer stalled while one broker was down", m)
	}
	waitFor(t, "the dead broker's partitions on the survivor", func() bool {
		return servedBy(owners(t, b2.Addr, "o"))[b2.Addr] == 4
	})
	if err := p.WaitPersisted(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every record read", func() bool { return r.count(0) >= before+after })
	r.check(t, before+after)
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
