package test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"sluice/internal/testbroker"
	"sluice/wire"
)

// produceLoad sends n produce requests of batch on one connection with up to depth in
// flight, and returns each request's latency. At a fixed rate (interval > 0) a request's
// clock starts at its scheduled time, so a broker that stalls is charged for the requests
// that waited behind it (no coordinated omission) — except that Go's timers wake up to
// about a millisecond late, which is the load generator's delay, not the broker's: within
// 2 ms of schedule the clock starts when the sender was ready. interval 0 sends as fast as
// the window allows, timing each request from its send.
func produceLoad(b *testing.B, addr, topic string, part uint32, batch []byte, n, depth int, interval time.Duration) []time.Duration {
	w := dial(b, addr)
	start := make([]time.Time, n)
	lat := make([]time.Duration, n)
	window := make(chan struct{}, depth)
	done := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			resp := w.recv()
			if resp.Header.Code != wire.CodeNone {
				done <- fmt.Errorf("produce: %v %s", resp.Header.Code, resp.Text)
				return
			}
			id := resp.Header.RequestID - 1
			lat[id] = time.Since(start[id])
			<-window
		}
		done <- nil
	}()
	t0 := time.Now()
	req := &wire.ProduceRequest{Topic: []byte(topic), Partition: part, Version: 1, Batches: batch}
	for i := 0; i < n; i++ {
		if interval > 0 {
			scheduled := t0.Add(time.Duration(i) * interval)
			time.Sleep(time.Until(scheduled))
			start[i] = scheduled
			if ready := time.Now(); ready.Sub(scheduled) < 2*time.Millisecond {
				start[i] = ready
			}
			window <- struct{}{}
		} else {
			window <- struct{}{}
			start[i] = time.Now()
		}
		w.send(req)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return lat
}

// BenchmarkProduce measures produce throughput of 1 KiB records in 64 KiB batches on one
// and on four connections (four partitions, one each), 8 requests in flight per
// connection, fsync group, against a real broker process. Then, at half of the measured
// rate, it reports latency percentiles (from intended send times).
func BenchmarkProduce(b *testing.B) {
	batch := records(0, -1, string(make([]byte, 1000)), 63) // 63 x ~1 KiB ≈ 64 KiB
	for _, conns := range []int{1, 4} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			br := testbroker.Start(b, b.TempDir(), "-arena-size", "2GiB")
			createTopic(b, dial(b, br.Addr), "p", conns)
			perConn := 2000
			run := func(interval time.Duration) (time.Duration, []time.Duration) {
				var wg sync.WaitGroup
				var mu sync.Mutex
				var all []time.Duration
				t0 := time.Now()
				for c := range conns {
					wg.Add(1)
					go func() {
						defer wg.Done()
						lat := produceLoad(b, br.Addr, "p", uint32(c), batch, perConn, 8, interval)
						mu.Lock()
						all = append(all, lat...)
						mu.Unlock()
					}()
				}
				wg.Wait()
				return time.Since(t0), all
			}
			b.ResetTimer()
			var elapsed time.Duration
			for i := 0; i < b.N; i++ {
				d, _ := run(0)
				elapsed += d
			}
			bytes := float64(b.N*conns*perConn) * float64(len(batch))
			rate := bytes / elapsed.Seconds()
			b.SetBytes(int64(conns * perConn * len(batch)))
			b.ReportMetric(rate/1e6, "MB/s")
			// Half of the maximum rate, spread evenly over the connections.
			reqPerSec := rate / float64(len(batch)) / 2 / float64(conns)
			_, lat := run(time.Duration(float64(time.Second) / reqPerSec))
			slices.Sort(lat)
			pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
			b.ReportMetric(pct(0.50), "p50-µs@half")
			b.ReportMetric(pct(0.99), "p99-µs@half")
			b.ReportMetric(pct(0.999), "p99.9-µs@half")
		})
	}
}
