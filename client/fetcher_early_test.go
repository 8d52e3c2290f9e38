package client_test

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"sluice/client"
)

// TestFetcherSendsEarly reads topics while a producer writes them in small batches, and
// checks that every record comes once and in order while the fetchers send their next
// request before the answer in front of it is read whole (two requests in flight per
// lane): with fetch_multi version 2 every lane does (the part table comes first), with
// version 1 only lanes of one partition do (the part headers of a lane of several are
// spread through the frame).
func TestFetcherSendsEarly(t *testing.T) {
	b := startBroker(t)
	for _, c := range []struct {
		version    uint16
		partitions int
		early      bool
	}{{2, 1, true}, {2, 2, true}, {2, 6, true}, {1, 1, true}, {1, 2, true}, {1, 6, false}} { // 2: two lanes of one; 6: two lanes of three
		t.Run(fmt.Sprintf("v%d-%d", c.version, c.partitions), func(t *testing.T) {
			topic := fmt.Sprintf("early%d-%d", c.version, c.partitions)
			createTopic(t, b.Addr, topic, c.partitions)
			const n = 3000
			ctx := ctxFor(t, 60*time.Second)
			cons, err := client.NewConsumer(ctx, topic, client.Brokers(b.Addr), client.FetchMaxWait(100*time.Millisecond),
				client.FetchMaxBytes(16<<10))
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			if c.version != 2 {
				client.PinFetchVersion(cons, b.Addr, c.version)
			}
			var wg sync.WaitGroup
			wg.Go(func() {
				p := newProducer(t, b.Addr, topic, client.Linger(100*time.Microsecond))
				defer closeProducer(t, p)
				for i := range n {
					if err := p.Produce(ctx, &client.Record{Key: []byte{byte(i)}, Value: value(uint64(i), 512)}); err != nil {
						t.Error(err)
						return
					}
					if i%50 == 0 {
						time.Sleep(time.Millisecond) // many answers, not one
					}
				}
			})
			next := map[int]int64{} // per partition: the next offset
			last := map[byte]uint64{}
			for got := 0; got < n; {
				if err := cons.Poll(ctx); err != nil {
					t.Fatalf("poll after %d records: %v", got, err)
				}
				for cons.Next() {
					r := cons.Record()
					if r.Offset != next[cons.Partition()] {
						t.Fatalf("partition %d: offset %d, want %d", cons.Partition(), r.Offset, next[cons.Partition()])
					}
					next[cons.Partition()]++
					id := binary.LittleEndian.Uint64(r.Value)
					if prev, ok := last[r.Key[0]]; ok && id <= prev {
						t.Fatalf("key %d: record %d after %d", r.Key[0], id, prev)
					}
					last[r.Key[0]] = id
					got++
				}
				if err := cons.Err(); err != nil {
					t.Fatal(err)
				}
			}
			wg.Wait()
			early := client.EarlyFetches(cons)
			t.Logf("%d partitions: %d requests sent early", c.partitions, early)
			if c.early && early == 0 {
				t.Fatal("no fetch request was sent before the answer in front of it was read")
			}
			if !c.early && early != 0 {
				t.Fatalf("%d requests sent early by lanes of several partitions", early)
			}
		})
	}
}
