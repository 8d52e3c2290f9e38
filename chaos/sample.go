package chaos

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"sluice/chaos/check"
	"sluice/client"
)

// The live consumer reads from the oldest record; samplers check the other ways a
// consumer starts. Each sampler consumer starts one way (from the newest record, at an
// offset, at a time, or over half the logical ranges from the oldest), reads for
// sampleFor, and records what it read: the checker holds its reads to the same rules
// (nothing unexpected, no position read two ways at or below C).

// sampleFor is how long one sampler consumer reads.
const sampleFor = 2 * time.Second

// startModes are the ways a sampler consumer starts, in the order they are cycled.
var startModes = []string{"newest", "offset", "time", "range"}

// sampler starts the short-lived consumers.
type sampler struct {
	topic string
	addrs func() []string
	hist  *check.History
	rng   *rand.Rand
	// counts are the sampler consumers that read, by start mode (startModes' order).
	counts [4]atomic.Int64
}

// run starts one sampler consumer after another until ctx ends.
func (s *sampler) run(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		mode := i % len(startModes)
		opts := []client.Opt{client.Brokers(s.addrs()...), client.FetchMaxWait(200 * time.Millisecond)}
		switch startModes[mode] {
		case "newest":
			opts = append(opts, client.Start(client.Newest()))
		case "offset": // low enough that every partition holds it after the first seconds
			opts = append(opts, client.Start(client.AtOffset(s.rng.Int64N(1000))))
		case "time":
			opts = append(opts, client.Start(client.AtTime(time.Now().Add(-time.Duration(1+s.rng.IntN(10))*time.Second))))
		case "range":
			lo := uint16(s.rng.IntN(1 << 15))
			opts = append(opts, client.Start(client.Oldest()), client.LogicalRange(lo, lo+1<<15))
		}
		c, err := client.NewConsumer(ctx, s.topic, opts...)
		if err != nil {
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		rd := &reader{topic: s.topic, addrs: s.addrs, hist: s.hist, next: map[int]int64{}}
		end := time.Now().Add(sampleFor)
		read := false
		for ctx.Err() == nil && time.Now().Before(end) {
			if rd.poll(ctx, c) != nil {
				break // a broker fault under way: the next sampler starts anew
			}
			read = true
		}
		c.Close()
		if read {
			s.counts[mode].Add(1)
		}
	}
}
