package test

import (
	"context"
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	"sluice/client"
	"sluice/internal/testbroker"
	"sluice/wire"
)

// BenchmarkTLSThroughput compares a broker serving TLS (the front of netio/tlsfront) with
// the same broker in plaintext: each iteration produces 64 MiB of 1 KiB records with the
// Go client (acknowledged on acceptance, 4 partitions) and consumes them back from the
// oldest. Plaintext consumes go by sendfile/writev straight to the socket; over TLS the
// front reads them from a unix socket and encrypts them. Run:
//
//	go test -run '^$' -bench TLSThroughput -benchtime 3x ./test/
func BenchmarkTLSThroughput(b *testing.B) {
	ca := newPKI(b, "bench")
	cert, key := ca.valid("broker", 10, false)
	for _, mode := range []string{"plain", "tls"} {
		b.Run(mode, func(b *testing.B) {
			var args []string
			var opts []client.Opt
			if mode == "tls" {
				args = []string{"-tls.cert", cert, "-tls.key", key}
				opts = []client.Opt{client.TLS(&tls.Config{RootCAs: ca.pool})}
			}
			br := testbroker.Start(b, b.TempDir(), append(args, "-arena.size", "2GiB")...)
			opts = append(opts, client.Brokers(br.Addr))
			const total = 64 << 20
			value := make([]byte, 1024)
			var produce, consume time.Duration
			for i := range b.N {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				topic := fmt.Sprintf("t%d", i)
				a, err := client.NewAdmin(opts...)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := a.CreateTopic(ctx, topic, 4, wire.TopicOptions{}); err != nil {
					b.Fatal(err)
				}
				a.Close()
				p, err := client.NewProducer(ctx, topic, opts...)
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				for range total / len(value) {
					if err := p.Produce(ctx, &client.Record{Value: value}); err != nil {
						b.Fatal(err)
					}
				}
				if err := p.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				produce += time.Since(start)
				p.Close(ctx)
				c, err := client.NewConsumer(ctx, topic, append(opts, client.Start(client.Oldest()))...)
				if err != nil {
					b.Fatal(err)
				}
				start = time.Now()
				for n := 0; n < total/len(value); {
					if err := c.Poll(ctx); err != nil {
						b.Fatal(err)
					}
					for c.Next() {
						n++
					}
				}
				consume += time.Since(start)
				c.Close()
				cancel()
			}
			mb := float64(b.N) * total / 1e6
			b.ReportMetric(mb/produce.Seconds(), "produce-MB/s")
			b.ReportMetric(mb/consume.Seconds(), "consume-MB/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
