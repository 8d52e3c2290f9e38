package client_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"sluice/batch"
	"sluice/client"
	"sluice/internal/testbroker"
	"sluice/wire"
)

const recordSize = 1 << 10

// BenchmarkProducer compares the producer with the ceiling of the same bytes written raw
// on a socket to the same broker, in the same run: b.N records of 1 KiB go, in
// alternating rounds of 16 MiB, through the raw path (prebuilt produce frames of one
// 1 MiB batch each, 8 in flight like the producer's default, every answer awaited) and
// through Producer.Produce then Flush (batching, framing and the window included). The
// rounds alternate because the broker's speed drifts as its arena fills. It reports both
// rates and their ratio (goal: at least 0.70); ns/op and MB/s count one record through
// both paths. The broker does not fsync: this measures the client, not the disk.
func BenchmarkProducer(b *testing.B) {
	// One broker for every run of the sub-benchmark (the outer function runs once).
	br := testbroker.Start(b, b.TempDir(), "--log.fsync", "never")
	b.Run("1KiB", func(b *testing.B) { benchProducer(b, br.Addr) })
	b.Run("1KiB-batch16", func(b *testing.B) { benchProduceBatch(b, br.Addr) })
}

// benchProduceBatch isolates ProduceBatch: b.N records of 1 KiB go, in alternating rounds
// of 16 MiB, through Produce one at a time and through ProduceBatch sixteen at a time
// (as the bench harness hands them over), each round ended by Flush, on producers of the
// same topic, the two paths taking turns to go first. It reports both rates and their
// ratio (batch over one at a time), and this process's processor time per record on each
// path (the broker is a process of its own, so that is the client's, the figure
// ProduceBatch is for: the wall-clock rates are bound by the broker); ns/op counts one
// record through both paths.
func benchProduceBatch(b *testing.B, addr string) {
	topic := createBenchTopic(b, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	one, many := newBenchProducer(ctx, b, addr, topic), newBenchProducer(ctx, b, addr, topic)
	const chunk = 16
	value := make([]byte, recordSize)
	rs := make([]client.Record, chunk)
	for i := range rs {
		rs[i].Value = value
	}
	b.SetBytes(recordSize)
	b.ReportAllocs()
	b.ResetTimer()
	// Each path's rounds, timed and with the process's processor time around them.
	var oneTime, manyTime, oneCPU, manyCPU time.Duration
	timed := func(wall, cpu *time.Duration, p *client.Producer, send func()) {
		start, c := time.Now(), processCPU(b)
		send()
		if err := p.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		*wall, *cpu = *wall+time.Since(start), *cpu+processCPU(b)-c
	}
	const round = 16 << 10 // records
	for r, done := 0, 0; done < b.N; r, done = r+1, done+round {
		n := min(round, b.N-done)
		single := func() {
			timed(&oneTime, &oneCPU, one, func() {
				for range n {
					if err := one.Produce(ctx, &rs[0]); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		batched := func() {
			timed(&manyTime, &manyCPU, many, func() {
				for left := n; left > 0; left -= chunk {
					k := min(chunk, left)
					if got, err := many.ProduceBatch(ctx, rs[:k]); err != nil || got != k {
						b.Fatalf("ProduceBatch added %d of %d: %v", got, k, err)
					}
				}
			})
		}
		// The paths take turns going first, so that what one leaves behind (its
		// producer's links finishing after Flush, a collection it provoked) falls on
		// both alike.
		if r%2 == 0 {
			single()
			batched()
		} else {
			batched()
			single()
		}
	}
	mb := float64(b.N) * recordSize / 1e6
	b.ReportMetric(float64(oneCPU.Nanoseconds())/float64(b.N), "produce-cpu-ns/rec")
	b.ReportMetric(float64(manyCPU.Nanoseconds())/float64(b.N), "batch-cpu-ns/rec")
	b.ReportMetric(mb/oneTime.Seconds(), "produce-MB/s")
	b.ReportMetric(mb/manyTime.Seconds(), "batch-MB/s")
	b.ReportMetric(oneTime.Seconds()/manyTime.Seconds(), "ratio")
}

func benchProducer(b *testing.B, addr string) {
	topic := createBenchTopic(b, addr)
	raw := newRawProducer(b, addr, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p := newBenchProducer(ctx, b, addr, topic)
	value := make([]byte, recordSize)
	b.SetBytes(recordSize)
	b.ReportAllocs()
	b.ResetTimer()
	var rawTime, prodTime time.Duration
	const round = 16 << 10 // records
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		start := time.Now()
		raw.send(b, n)
		rawTime += time.Since(start)
		start = time.Now()
		for range n {
			if err := p.Produce(ctx, &client.Record{Value: value}); err != nil {
				b.Fatal(err)
			}
		}
		if err := p.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		prodTime += time.Since(start)
	}
	mb := float64(b.N) * recordSize / 1e6
	b.ReportMetric(mb/rawTime.Seconds(), "raw-MB/s")
	b.ReportMetric(mb/prodTime.Seconds(), "producer-MB/s")
	b.ReportMetric(rawTime.Seconds()/prodTime.Seconds(), "ratio")
}

// newBenchProducer returns a producer of topic with the default settings, closed when
// the benchmark ends.
func newBenchProducer(ctx context.Context, b *testing.B, addr string, topic wire.Topic) *client.Producer {
	p, err := client.NewProducer(ctx, topic.Name, client.Brokers(addr))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { // after the benchmark's own ctx is cancelled
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p.Close(cctx)
	})
	return p
}

// processCPU returns the processor time this process (the client, not the broker) has
// used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var benchTopics int

func createBenchTopic(b *testing.B, addr string) wire.Topic { return createBenchTopicN(b, addr, 1) }

// createBenchTopicN creates a topic of parts partitions with a fresh name.
func createBenchTopicN(b *testing.B, addr string, parts int) wire.Topic {
	a, err := client.NewAdmin(client.Brokers(addr))
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	benchTopics++
	name := "bench-" + string(rune('a'+benchTopics%26)) + time.Now().Format("150405.000000")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t, err := a.CreateTopic(ctx, name, parts, wire.TopicOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return t
}

// rawProducer writes prebuilt produce frames (one batch of 1 KiB records each, without a
// producer id, so the same bytes may be sent again) and reads the answers.
type rawProducer struct {
	nc     net.Conn
	frame  []byte
	count  int // records per frame
	nextID uint32
}

func newRawProducer(b *testing.B, addr string, topic wire.Topic) *rawProducer {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close() })
	var bld batch.Builder
	bld.Reset(nil, 0, -1)
	value := make([]byte, recordSize)
	for bld.LenWith(0, nil, value) <= 1<<20 {
		bld.Add(0, time.Now().UnixMilli(), nil, value)
	}
	r := &rawProducer{nc: nc, count: bld.Count()}
	bt := bld.Finish()
	req := wire.ProduceRequest{Topic: []byte(topic.Name), Version: topic.Version}
	r.frame = req.AppendFrameHeader(nil, wire.RequestHeader{APIKey: wire.APIProduce}, len(bt))
	r.frame = append(r.frame, bt...)
	return r
}

// send writes frames holding at least n records, at most 8 unanswered at a time, and
// waits for every answer.
func (r *rawProducer) send(b *testing.B, n int) {
	frames := (n + r.count - 1) / r.count
	slots := make(chan struct{}, 8)
	done := make(chan error, 1)
	go func() {
		var resp wire.Response
		buf := make([]byte, 64<<10)
		have := 0
		for i := 0; i < frames; i++ {
			for {
				size, _, err := wire.PeekResponse(buf[:have], wire.DefaultMaxFrame)
				if err == nil && have >= size {
					if _, err := resp.Decode(buf[:size], wire.DefaultMaxFrame); err != nil || resp.Err() != nil {
						done <- errors.Join(err, resp.Err())
						return
					}
					have = copy(buf, buf[size:have])
					break
				}
				m, err := r.nc.Read(buf[have:])
				if err != nil {
					done <- err
					return
				}
				have += m
			}
			<-slots
		}
		done <- nil
	}()
	for range frames {
		slots <- struct{}{}
		r.nextID++
		binary.LittleEndian.PutUint32(r.frame[8:], r.nextID) // the request id
		if _, err := r.nc.Write(r.frame); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
