package test

import (
	"fmt"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"sluice/internal/testbroker"
	"sluice/wire"
)

// BenchmarkWake times the broker's long-poll wake alone: from a produce of one 1 KiB
// record sent to the moment every poll parked at the partition's end has its answer with
// the record, over loopback with raw wire clients (no client library, no batching). With
// 1 poll the appending event loop answers it itself (an idle shard: sched.Shard.TryRun);
// with inlineWakeMaxPlus polls the append hands them to the partition's shard goroutine
// (broker/produce.go). The ceiling, measured in the same run, is a relay: a plain Go
// server that copies what one connection sends to another (two hops over loopback, one
// goroutine wake-up on each side, as the broker's path has).
//
// wake-p50-µs and wake-p99-µs are of the iterations, and p50/relay is the ratio of the
// medians; ns/op also counts the time each iteration leaves for the polls to park.
// woken/op is the broker's count of wakes per produce (sluice_long_poll_wakes_total): 1
// when every poll was parked before its record came, as the benchmark means it to be.
// queue-, append- and wake-µs/op are the broker's own stages per produce (the
// wake's polls summed), from its stage histograms: what is left is the network, the
// event loops' wake-ups and the clients.
func BenchmarkWake(b *testing.B) {
	br := testbroker.Start(b, b.TempDir(), "-metrics", "127.0.0.1:0")
	w := dial(b, br.Addr)
	createTopic(b, w, "wb", 1)
	relay := relayMedian(b, 2000)
	var offset int64
	for _, polls := range []int{1, inlineWakeMaxPlus} {
		where := map[bool]string{true: "loop", false: "shard"}[polls == 1]
		b.Run(fmt.Sprintf("polls=%d-on-%s", polls, where), func(b *testing.B) {
			conns := make([]*wireConn, polls)
			for i := range conns {
				conns[i] = dial(b, br.Addr)
			}
			value := string(make([]byte, 1000))
			wakes := func() float64 {
				return scrape(b, br.MetricsAddr, `sluice_long_poll_wakes_total{where="loop"}`) +
					scrape(b, br.MetricsAddr, `sluice_long_poll_wakes_total{where="shard"}`)
			}
			before := wakes()
			stagesBefore := stageSums(b, br.MetricsAddr)
			took := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				for _, c := range conns {
					c.send(&wire.FetchRequest{Topic: []byte("wb"), Offset: offset, MaxBytes: 1 << 20, MaxWaitMs: 10_000})
				}
				// The polls park meanwhile (woken/op says whether they did). Go's sleeps
				// under a millisecond last about one: ns/op is mostly this.
				time.Sleep(200 * time.Microsecond)
				t0 := time.Now()
				w.send(&wire.ProduceRequest{Topic: []byte("wb"), Version: 1, Batches: records(0, -1, value, 1)})
				for i, c := range conns {
					resp := c.recv()
					mustOK(b, resp)
					if len(resp.Body.(*wire.FetchResponse).Records) == 0 {
						b.Fatalf("poll %d at offset %d answered without the record", i, offset)
					}
				}
				took = append(took, time.Since(t0))
				mustOK(b, w.recv())
				offset++
			}
			b.StopTimer()
			p50, p99 := percentile(took, 50), percentile(took, 99)
			b.ReportMetric(float64(p50.Nanoseconds())/1e3, "wake-p50-µs")
			b.ReportMetric(float64(p99.Nanoseconds())/1e3, "wake-p99-µs")
			b.ReportMetric(p50.Seconds()/relay.Seconds(), "p50/relay")
			b.ReportMetric((wakes()-before)/float64(b.N), "woken/op")
			for stage, sum := range stageSums(b, br.MetricsAddr) {
				b.ReportMetric((sum-stagesBefore[stage])*1e6/float64(b.N), stage+"-µs/op")
			}
		})
	}
}

// stageSums returns the broker's seconds in each of its request stages so far
// (sluice_request_stage_seconds: broker/stages.go), where a wake's time is spent.
func stageSums(b *testing.B, addr string) map[string]float64 {
	sums := map[string]float64{}
	// (send is timed for fetch_multi answers only: these polls are single fetches.)
	for _, stage := range []string{"queue", "append", "wake"} {
		sums[stage] = scrape(b, addr, `sluice_request_stage_seconds_sum{stage="`+stage+`"}`)
	}
	return sums
}

// relayMedian measures the ceiling of BenchmarkWake: the median time of n messages of
// 1 KiB from one loopback connection, through a Go server that copies them on, to
// another, each message sent after the previous one arrived and the same pause after.
func relayMedian(b *testing.B, n int) time.Duration {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		in, err := ln.Accept()
		if err != nil {
			return
		}
		defer in.Close()
		out, err := ln.Accept()
		if err != nil {
			return
		}
		defer out.Close()
		_, _ = io.Copy(out, in)
	}()
	src, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	dst, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	msg, buf := make([]byte, 1024), make([]byte, 1024)
	took := make([]time.Duration, 0, n)
	for range n {
		time.Sleep(200 * time.Microsecond) // as BenchmarkWake: both sides asleep
		t0 := time.Now()
		if _, err := src.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(dst, buf); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
	}
	src.Close()
	dst.Close()
	<-done
	return percentile(took, 50)
}

// percentile returns the p-th percentile of d, which it sorts.
func percentile(d []time.Duration, p int) time.Duration {
	slices.Sort(d)
	return d[min(len(d)*p/100, len(d)-1)]
}
