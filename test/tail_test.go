package test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sluice/client"
	"sluice/internal/testbroker"
	"sluice/wire"
)

// TestConsumeAtTheTailUnderLoad: two producers on their own connections (so on both
// event loops, appending concurrently) write small batches to one partition as fast as
// they can for a few seconds, while a consumer reads at the tail, its fetches racing
// the appends on the partition's shard. It must read every record once, in each
// producer's order, and never get an answer it refuses: a read that took a batch an
// appender had copied but not yet published once answered a high watermark below its
// own records, which the consumer rejects as malformed (engine.Partition.end; the bench
// found it at 300 000 records/s). The rate, not a timing, is what makes the race
// likely; the assertions are about the records only.
func TestConsumeAtTheTailUnderLoad(t *testing.T) {
	b := testbroker.Start(t, t.TempDir(), "-metrics", "127.0.0.1:0")
	createTopic(t, dial(t, b.Addr), "tail", 1)
	const producers, perBatch = 2, 4
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := client.NewConsumer(ctx, "tail", client.Brokers(b.Addr), client.Start(client.Oldest()))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	stop := time.Now().Add(4 * time.Second)
	sent := make([]int, producers)
	var wg sync.WaitGroup
	var quit atomic.Bool // the consumer failed: the producers stop before the test ends
	defer func() { quit.Store(true); wg.Wait() }()
	for p := range producers {
		w := dial(t, b.Addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			value := make([]byte, 16)
			for time.Now().Before(stop) && !quit.Load() {
				var req []byte
				for range perBatch {
					binary.LittleEndian.PutUint64(value, uint64(p))
					binary.LittleEndian.PutUint64(value[8:], uint64(sent[p]))
					req = append(req, records(0, -1, string(value), 1)...)
					sent[p]++
				}
				w.send(&wire.ProduceRequest{Topic: []byte("tail"), Version: 1, Batches: req})
				if resp := w.recv(); resp.Header.Code != wire.CodeNone {
					t.Errorf("producer %d: %v", p, resp.Header.Code)
					return
				}
			}
		}()
	}

	got := make([]int, producers)
	var read int
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	finished := false
	for {
		select {
		case <-done:
			finished = true
		default:
		}
		if finished {
			total := 0
			for _, n := range sent {
				total += n
			}
			if read == total {
				break
			}
		}
		if err := cs.Poll(ctx); err != nil {
			t.Fatalf("poll after %d records: %v", read, err)
		}
		for cs.Next() {
			v := cs.Record().Value
			p, seq := int(binary.LittleEndian.Uint64(v)), int(binary.LittleEndian.Uint64(v[8:]))
			if p >= producers || seq != got[p] {
				t.Fatalf("record %d: producer %d sequence %d, want %d", read, p, seq, got[min(p, producers-1)])
			}
			got[p]++
			read++
		}
		if err := cs.Err(); err != nil {
			t.Fatalf("after %d records: %v", read, err)
		}
	}
	t.Logf("read %d records of %v, all in order", read, sent)
	if fmt.Sprint(got) != fmt.Sprint(sent) {
		t.Fatalf("read %v, sent %v", got, sent)
	}
	// The answers raced their makers' writes too (netio/send.go): most went out from the
	// goroutine that made them, each counted once by its writer.
	answerer := scrape(t, b.MetricsAddr, `sluice_net_answers_written_total{writer="answerer"}`)
	loop := scrape(t, b.MetricsAddr, `sluice_net_answers_written_total{writer="loop"}`)
	t.Logf("answers written by their makers %v, by the loops %v", answerer, loop)
	if answerer == 0 {
		t.Fatal("no answer was written by the goroutine that made it")
	}
}
