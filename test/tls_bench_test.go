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
// the same broker in plaintext, in the same run. Each iteration produces 64 MiB of 1 KiB
// records with the Go client (acknowledged on acceptance, 4 partitions), then consumes
// them from the oldest three times:
//
//   - memory: at once, from the arena's write buffers (writev);
//   - segment-cold: after a restart of the broker, so the records are only in segment
//     files, written with O_DIRECT and so not in the page cache: sendfile from the disk;
//   - segment: once more, now from the page cache: sendfile without the disk.
//
// Each pass checks from the broker's sluice_fetch_bytes_total{path} which path served it
// (and fails the benchmark if another did). In plaintext sendfile writes to the client's
// socket; behind the TLS front it writes to the unix socket the front reads, encrypts and
// relays. Run:
//
//	go test -run '^$' -bench TLSThroughput -benchtime 3x -count 3 ./test/
func BenchmarkTLSThroughput(b *testing.B) {
	ca := newPKI(b, "bench")
	cert, key := ca.valid("broker", 10, false)
	for _, mode := range []string{"plain", "tls"} {
		b.Run(mode, func(b *testing.B) {
			args := []string{"-arena.size", "2GiB", "-metrics", "127.0.0.1:0"}
			var opts []client.Opt
			if mode == "tls" {
				args = append(args, "-tls.cert", cert, "-tls.key", key)
				opts = []client.Opt{client.TLS(&tls.Config{RootCAs: ca.pool})}
			}
			br := testbroker.Start(b, b.TempDir(), args...)
			opts = append(opts, client.Brokers(br.Addr))
			var produce time.Duration
			passes := map[string]time.Duration{}
			for i := range b.N {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				topic := fmt.Sprintf("t%d", i)
				produce += benchProduce(ctx, b, topic, opts)
				passes["memory"] += benchConsume(ctx, b, br, topic, "copy", opts)
				if err := br.Stop(); err != nil {
					b.Fatal(err)
				}
				br.Restart()
				passes["segment-cold"] += benchConsume(ctx, b, br, topic, "sendfile", opts)
				passes["segment"] += benchConsume(ctx, b, br, topic, "sendfile", opts)
				cancel()
			}
			mb := float64(b.N) * benchBytes / 1e6
			b.ReportMetric(mb/produce.Seconds(), "produce-MB/s")
			for pass, took := range passes {
				b.ReportMetric(mb/took.Seconds(), pass+"-MB/s")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// benchBytes is what each iteration of BenchmarkTLSThroughput produces, in records of
// benchRecord bytes.
const benchBytes, benchRecord = 64 << 20, 1024

// benchProduce creates topic and produces benchBytes to it, and returns how long the
// produce took.
func benchProduce(ctx context.Context, b *testing.B, topic string, opts []client.Opt) time.Duration {
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
	defer p.Close(ctx)
	value := make([]byte, benchRecord)
	start := time.Now()
	for range benchBytes / benchRecord {
		if err := p.Produce(ctx, &client.Record{Value: value}); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// benchConsume reads topic from the oldest record to the last and returns how long it
// took. The broker's metrics must show that path (sendfile or copy) sent at least what
// was read, and the other path less than 1 % of it.
func benchConsume(ctx context.Context, b *testing.B, br *testbroker.Broker, topic, path string, opts []client.Opt) time.Duration {
	other := map[string]string{"copy": "sendfile", "sendfile": "copy"}[path]
	sample := func(p string) float64 {
		return testbroker.Scrape(b, br.MetricsAddr, `sluice_fetch_bytes_total{path="`+p+`"}`)
	}
	want0, other0 := sample(path), sample(other)
	c, err := client.NewConsumer(ctx, topic, append(opts, client.Start(client.Oldest()))...)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	for n := 0; n < benchBytes/benchRecord; {
		if err := c.Poll(ctx); err != nil {
			b.Fatal(err)
		}
		for c.Next() {
			n++
		}
	}
	took := time.Since(start)
	if sent, others := sample(path)-want0, sample(other)-other0; sent < benchBytes || others > sent/100 {
		b.Fatalf("consume of %s: %.0f bytes by %s and %.0f by %s; want the records (%d bytes) by %s", topic, sent, path,
			others, other, benchBytes, path)
	}
	return took
}
