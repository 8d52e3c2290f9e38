package client_test

import (
	"context"
	"testing"
	"time"

	"sluice/client"
	"sluice/internal/testbroker"
)

// BenchmarkConsumer reads b.N records of 1 KiB, produced beforehand to 4 partitions of a
// real broker (from its arena: consume from memory), with the consumer's defaults but a
// 4 MiB budget: fetch_multi, one request in flight per broker, the fetcher reading the
// next answer while the records of the last one are iterated. ns/op and MB/s count one
// record; allocs/op must stay near 0 (allocations are per answer, not per record).
func BenchmarkConsumer(b *testing.B) {
	br := testbroker.Start(b, b.TempDir(), "--log.fsync", "never", "--arena-size", "2GiB")
	b.Run("1KiB-4partitions", func(b *testing.B) {
		topic := createBenchTopicN(b, br.Addr, 4)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		p, err := client.NewProducer(ctx, topic.Name, client.Brokers(br.Addr))
		if err != nil {
			b.Fatal(err)
		}
		value := make([]byte, recordSize)
		for range b.N {
			if err := p.Produce(ctx, &client.Record{Value: value}); err != nil {
				b.Fatal(err)
			}
		}
		if err := p.Close(ctx); err != nil {
			b.Fatal(err)
		}
		c, err := client.NewConsumer(ctx, topic.Name, client.Brokers(br.Addr), client.FetchMaxBytes(4<<20))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		b.SetBytes(recordSize)
		b.ReportAllocs()
		b.ResetTimer()
		for n := 0; n < b.N; {
			if err := c.Poll(ctx); err != nil {
				b.Fatal(err)
			}
			for c.Next() {
				n++
			}
			if err := c.Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
