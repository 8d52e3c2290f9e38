package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"sluice/internal/nanosleep"
)

// Counters are a run's shared counts. Safe from any goroutine.
type Counters struct {
	records, bytes, errors atomic.Int64
	mu                     struct {
		sync.Mutex
		first string
	}
}

func (c *Counters) add(n, bytes int64) { c.records.Add(n); c.bytes.Add(bytes) }

// failOn counts err when it is one (an acknowledgment callback).
func (c *Counters) failOn(err error) {
	if err != nil {
		c.fail(err)
	}
}

func (c *Counters) fail(err error) {
	if c.errors.Add(1) == 1 {
		c.mu.Lock()
		c.mu.first = err.Error()
		c.mu.Unlock()
	}
}

func (c *Counters) firstError() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.first
}

// Run runs the workload named by w: "produce", "consume" or "e2e". Progress, if not
// nil, gets a live line every second (a terminal line rewritten with \r).
func Run(ctx context.Context, w string, c Config, progress io.Writer) (*Result, error) {
	c.EnsureDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	d, err := Open(c.System, c.Broker)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	err = d.Prepare(pctx, &c)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("cannot prepare %s topic %s: %w", c.System, c.Topic, err)
	}
	switch w {
	case "produce":
		return RunProduce(ctx, d, c, progress)
	case "consume":
		return RunConsume(ctx, d, c, progress)
	case "e2e":
		return RunE2E(ctx, d, c, progress)
	}
	return nil, fmt.Errorf("unknown workload %q", w)
}

// produceLoop is one producer's loop: it sends quota records (0 = no limit) at rate
// (0 = as fast as it can) until ctx ends, stamping each with its intended send time.
//
// The records a wake-up of the pacer releases are stamped together into a chunk of
// record buffers, then handed over: at once to a driver that takes several
// (BatchSender), else one by one. At 750 000 records/s a wake-up releases about 40.
func produceLoop(ctx context.Context, p Producer, c *Config, clk clock, rate float64, quota int64, cnt *Counters, rec *Recorder) {
	slots := newChunk(c.RecordSize)
	stamps := make([]int64, len(slots))
	pacer := NewPacer(time.Unix(0, clk.now()), rate)
	sleeper, _ := nanosleep.NewSleeper() // without a timerfd, it sleeps in nanosleep(2)
	defer sleeper.Close()
	bs, _ := p.(BatchSender)
	acks := p.Acks()
	if acks {
		bs = nil // one callback per record
	}
	var sent int64
	for ctx.Err() == nil && (quota == 0 || sent < quota) {
		now := clk.now()
		first, n := pacer.Take(now)
		if n == 0 {
			sleepUntil(max(pacer.Due(), now+int64(minPace)), clk, sleeper)
			continue
		}
		if quota > 0 {
			n = min(n, quota-sent)
		}
		for i := int64(0); i < n; {
			k := min(n-i, int64(len(slots)))
			for j := range k {
				stamp := now
				if pacer.Paced() {
					stamp = pacer.Intended(first + i + j)
				}
				if i+j > 0 && (i+j)%16 == 0 {
					// The records of one wake-up are handed over within microseconds of
					// each other: their hand-over time (the schedule stage's end) is read
					// once per 16, not per record (a clock read costs about 0.1 µs on
					// these hosts).
					now = clk.now()
				}
				putStamp(slots[j], stamp)
				putSent(slots[j], now)
				stamps[j] = stamp
			}
			// Counted before they go: counted after, a record could reach the consumer
			// (and the consumer's count) first, and if the warm-up's reset of both counts
			// fell in between, the run reported it sent and never consumed (one of 6 M in
			// a relay run of 2026-12-03).
			cnt.add(k, k*int64(c.RecordSize))
			if queued, err := handOver(ctx, p, bs, slots[:k], stamps[:k], acks, clk, cnt, rec); err != nil {
				// Those that did not go are taken back: a chunk that fails part way (the
				// run's end while the producer waits for room) is not counted whole.
				left := k - int64(queued)
				cnt.add(-left, -left*int64(c.RecordSize))
				if ctx.Err() == nil {
					cnt.fail(err)
				}
				return
			}
			i += k
		}
		sent += n
	}
}

// handOver sends a chunk of stamped records: in one call to a BatchSender, else one Send
// each, with an acknowledgment callback when the driver reports them (recording the
// record's latency from its stamp when rec is set). It returns how many the driver
// queued.
func handOver(ctx context.Context, p Producer, bs BatchSender, vals [][]byte, stamps []int64, acks bool, clk clock, cnt *Counters, rec *Recorder) (int, error) {
	if bs != nil {
		return bs.SendBatch(ctx, vals)
	}
	for j, v := range vals {
		var a func(error)
		switch {
		case acks && rec != nil:
			stamp := stamps[j]
			a = func(err error) {
				if err != nil {
					cnt.fail(err)
					return
				}
				rec.Record(clk.now() - stamp)
			}
		case acks:
			a = cnt.failOn
		}
		if err := p.Send(ctx, v, a); err != nil {
			return j, err
		}
	}
	return len(vals), nil
}

// chunkBytes bounds the record buffers produceLoop stamps a wake-up's records in: small
// enough to stay in the level-1 cache, from which the producer copies them. With 64
// buffers of 1 KiB, the producer's copy of the records into its batches took three times
// as long as with one buffer (0.80 s against 0.27 s of a 10 s run at 750 000 records/s).
const chunkBytes = 16 << 10

// newChunk returns up to 16 record buffers of size bytes (at least one, at most
// chunkBytes together unless one is larger), filled with the run's payload.
func newChunk(size int) [][]byte {
	n := min(16, max(1, chunkBytes/size))
	buf := make([]byte, n*size)
	fillPayload(buf[stampSize:size], rand.Uint64())
	slots := make([][]byte, n)
	for i := range slots {
		slots[i] = buf[i*size : (i+1)*size : (i+1)*size]
		copy(slots[i], buf[:size])
	}
	return slots
}

// fillPayload fills b with bytes that compress about 2:1 (half random, half repeated), so
// that compression settings have something to do.
func fillPayload(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := range b {
		if i%2 == 0 {
			b[i] = byte(r.Uint32())
		} else {
			b[i] = 'a'
		}
	}
}

// split divides total into n shares whose sum is total.
func split(total int64, n, i int) int64 {
	q := total / int64(n)
	if int64(i) < total%int64(n) {
		q++
	}
	return q
}

// RunProduce measures producers alone: records/s and MB/s until every record sent was
// acknowledged (Flush), and the acknowledgment latency where the driver reports it.
func RunProduce(ctx context.Context, d Driver, c Config, progress io.Writer) (*Result, error) {
	prods := make([]Producer, c.Producers)
	for i := range prods {
		p, err := d.NewProducer(ctx, &c)
		if err != nil {
			closeAll(prods[:i])
			return nil, fmt.Errorf("cannot start producer: %w", err)
		}
		prods[i] = p
	}
	defer closeAll(prods)
	var cnt Counters
	rec := NewRecorder()
	clk := newClock()
	res := &Result{Workload: "produce", Config: c, Start: time.Now()}
	rctx, cancel := produceContext(ctx, &c, &cnt)
	defer cancel()
	stopSeries := sampleSeries(&cnt, &res.Series)
	stop := startProgress(progress, c.System, &cnt, rec)
	var wg, sending sync.WaitGroup
	sending.Add(len(prods))
	go func() { sending.Wait(); stopSeries() }() // the series covers the sends, not the flush
	for i, p := range prods {
		wg.Go(func() {
			produceLoop(rctx, p, &c, clk, c.Rate/float64(len(prods)), split(c.Count, len(prods), i), &cnt, rec)
			sending.Done()
			fctx, fcancel := context.WithTimeout(ctx, time.Minute)
			defer fcancel()
			if err := p.Flush(fctx); err != nil {
				cnt.fail(fmt.Errorf("cannot flush: %w", err))
			}
		})
	}
	wg.Wait()
	stop()
	stopSeries()
	res.Records, res.Bytes = cnt.records.Load(), cnt.bytes.Load()
	res.Errors, res.FirstError = cnt.errors.Load(), cnt.firstError()
	res.finish(time.Since(res.Start))
	res.Latency = rec.Summary(c.Rate > 0)
	return res, nil
}

// produceContext is the context of a produce run's sends: it ends at c.Duration, or for a
// sustained run (c.MinBytes > 0) once both c.Duration has passed and c.MinBytes were sent,
// or at c.MaxDuration, whichever comes first.
func produceContext(ctx context.Context, c *Config, cnt *Counters) (context.Context, context.CancelFunc) {
	if c.MinBytes == 0 {
		return runContext(ctx, c.Duration)
	}
	rctx, cancel := context.WithTimeout(ctx, c.MaxDuration)
	minEnd := time.Now().Add(c.Duration)
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case now := <-t.C:
				if now.After(minEnd) && cnt.bytes.Load() >= c.MinBytes {
					cancel()
					return
				}
			case <-rctx.Done():
				return
			}
		}
	}()
	return rctx, cancel
}

// sampleSeries appends to *series, every second until the returned stop is called, the
// MB/s of value bytes sent in that second (the last, partial second is not kept). stop
// may be called more than once; every call returns once the sampling ended.
func sampleSeries(cnt *Counters, series *[]float64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		prev, prevT := int64(0), time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				b := cnt.bytes.Load()
				*series = append(*series, float64(b-prev)/now.Sub(prevT).Seconds()/1e6)
				prev, prevT = b, now
			}
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// idleEnd is how long consumers may see nothing, once they read something, before a
// consume run counts the topic as read to its end.
const idleEnd = 2 * time.Second

// RunConsume measures consumers reading what the topic holds: records/s and MB/s from
// the first read to the last record, ending at Count records, at Duration, or when no
// record came for idleEnd.
func RunConsume(ctx context.Context, d Driver, c Config, progress io.Writer) (*Result, error) {
	cons, err := newConsumers(ctx, d, &c)
	if err != nil {
		return nil, err
	}
	defer closeAll(cons)
	var cnt Counters
	res := &Result{Workload: "consume", Config: c, Start: time.Now()}
	rctx, cancel := runContext(ctx, c.Duration)
	defer cancel()
	var last atomic.Int64 // Unix ns of the last record read
	last.Store(res.Start.UnixNano())
	go func() { // ends the run once the consumers go idle
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for rctx.Err() == nil {
			select {
			case <-t.C:
				if cnt.records.Load() > 0 && time.Since(time.Unix(0, last.Load())) > idleEnd {
					cancel()
				}
			case <-rctx.Done():
			}
		}
	}()
	stop := startProgress(progress, c.System, &cnt, nil)
	var wg sync.WaitGroup
	for _, cs := range cons {
		wg.Go(func() {
			// Counted 256 records at a time (one atomic add, one clock read), and at the
			// record that brings the count seen at the last add to c.Count: checked only
			// every 256, a count that is not a multiple of it (the suite's 2 M) left the
			// last records uncounted until the consumers had idled for idleEnd, two
			// seconds a run.
			var n, bytes, seen int64
			err := cs.Run(rctx, func(v []byte) bool {
				n++
				bytes += int64(len(v))
				if n == 256 || c.Count > 0 && seen+n >= c.Count {
					cnt.add(n, bytes)
					last.Store(time.Now().UnixNano())
					n, bytes = 0, 0
					seen = cnt.records.Load()
					if c.Count > 0 && seen >= c.Count {
						cancel()
						return false
					}
				}
				return true
			})
			cnt.add(n, bytes) // the remainder: its time is within 256 records of last
			if err != nil && rctx.Err() == nil {
				cnt.fail(err)
				cancel()
			}
		})
	}
	wg.Wait()
	stop()
	res.Records, res.Bytes = cnt.records.Load(), cnt.bytes.Load()
	res.Errors, res.FirstError = cnt.errors.Load(), cnt.firstError()
	res.finish(time.Unix(0, last.Load()).Sub(res.Start))
	return res, nil
}

// drainWait bounds how long an end-to-end run waits, after the producers stopped, for
// the consumers to read what was sent.
const drainWait = 5 * time.Second

// RunE2E runs producers (at c.Rate, or as fast as they can) and consumers reading from
// the tail at the same time, and measures the latency from each record's intended send
// time to its arrival at a consumer; latencies of the first c.Warmup are dropped.
func RunE2E(ctx context.Context, d Driver, c Config, progress io.Writer) (*Result, error) {
	c.FromStart = false
	cons, err := newConsumers(ctx, d, &c)
	if err != nil {
		return nil, err
	}
	defer closeAll(cons)
	prods := make([]Producer, c.Producers)
	for i := range prods {
		if prods[i], err = d.NewProducer(ctx, &c); err != nil {
			closeAll(prods[:i])
			return nil, fmt.Errorf("cannot start producer: %w", err)
		}
	}
	defer closeAll(prods)
	var sent, got Counters
	rec := NewRecorder()
	clk := newClock() // the stamps' and the arrivals' clock
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	var cwg sync.WaitGroup
	st := newStages()
	for _, cs := range cons {
		arr, _ := cs.(Arrivals)
		cwg.Go(func() {
			// Latencies go to the recorder 256 at a time (one lock); the count goes up
			// with every record, so that the drain below sees the last ones arrive.
			lat := make([]int64, 0, 256)
			ss := make([]stageSample, 0, 256)
			flush := func() {
				rec.RecordAll(lat)
				st.recordAll(ss)
				lat, ss = lat[:0], ss[:0]
			}
			// The clock is read for every record: within one poll a consumer may still
			// check and decompress a later batch, be descheduled or collected, and the
			// flush below may wait for the recorder's lock. A reading shared by several
			// records would leave that time out of the later ones (tried: a read per
			// poll and per 16 records under-measured a stall within a poll by half,
			// TestE2EStallWithinPoll).
			err := cs.Run(cctx, func(v []byte) bool {
				now := clk.now()
				lat = append(lat, now-stampOf(v))
				var arrived int64
				if arr != nil {
					arrived = arr.Arrived()
				}
				ss = append(ss, sampleOf(v, arrived, now))
				got.add(1, int64(len(v)))
				if len(lat) == cap(lat) {
					flush()
				}
				return true
			})
			flush()
			if err != nil && cctx.Err() == nil {
				got.fail(err)
			}
		})
	}
	res := &Result{Workload: "e2e", Config: c, Start: time.Now()}
	var startNs atomic.Int64 // the measured part's start; moved by the warm-up
	startNs.Store(res.Start.UnixNano())
	// The broker's stages at the start of the measured part (stages.go); set by the
	// warm-up's goroutine.
	var brokerBefore atomic.Pointer[map[string]*stageBuckets]
	// The processor times at the start of the measured part; also moved by the warm-up.
	var cpuBefore atomic.Pointer[cpuMark]
	// The measured part's start and end are the processor marks' own instants, so that
	// the processor times cover exactly the span the run's figures divide by, however
	// long the host keeps this goroutine from running between two statements.
	if c.Warmup == 0 {
		b := scrapeBefore(ctx, &c)
		brokerBefore.Store(&b)
		m := markCPU(c.ServerPid)
		startNs.Store(m.at.UnixNano())
		cpuBefore.Store(&m)
	}
	rctx, cancel := runContext(ctx, c.Duration+c.Warmup)
	defer cancel()
	stop := startProgress(progress, c.System, &got, rec)
	if c.Warmup > 0 {
		go func() {
			select {
			case <-time.After(c.Warmup):
				rec.Reset()
				st.reset()
				resetStages(prods)
				b := scrapeBefore(ctx, &c)
				brokerBefore.Store(&b)
				// Throughput counts from here too: the measured part starts now.
				m := markCPU(c.ServerPid)
				startNs.Store(m.at.UnixNano())
				got.records.Store(0)
				got.bytes.Store(0)
				sent.records.Store(0)
				cpuBefore.Store(&m)
			case <-rctx.Done():
			}
		}()
	}
	stopSeries := sampleLatencySeries(rec, startNs.Load, &res.LatencySeries)
	var pwg sync.WaitGroup
	for i, p := range prods {
		pwg.Go(func() {
			produceLoop(rctx, p, &c, clk, c.Rate/float64(len(prods)), split(c.Count, len(prods), i), &sent, nil)
			fctx, fcancel := context.WithTimeout(ctx, time.Minute)
			defer fcancel()
			if err := p.Flush(fctx); err != nil {
				sent.fail(fmt.Errorf("cannot flush: %w", err))
			}
		})
	}
	pwg.Wait()
	endMark := markCPU(c.ServerPid)
	end := endMark.at
	if before := cpuBefore.Load(); before != nil {
		res.CPU = cpuSince(*before, endMark)
	}
	stopSeries()
	for deadline := time.Now().Add(drainWait); got.records.Load() < sent.records.Load() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	ccancel()
	cwg.Wait()
	stop()
	res.Records, res.Bytes = got.records.Load(), got.bytes.Load()
	res.Errors = sent.errors.Load() + got.errors.Load()
	res.FirstError = sent.firstError() + got.firstError()
	if missing := sent.records.Load() - res.Records; missing > 0 {
		res.Errors += missing
		if res.FirstError == "" {
			res.FirstError = fmt.Sprintf("%d records sent but not consumed within %v", missing, drainWait)
		}
	}
	res.Start = time.Unix(0, startNs.Load())
	res.finish(end.Sub(res.Start))
	res.Latency = rec.Summary(c.Rate > 0)
	res.Breakdown = st.summary()
	if res.Breakdown != nil {
		var before map[string]*stageBuckets
		if b := brokerBefore.Load(); b != nil {
			before = *b
		}
		res.Breakdown.Stages = componentStages(ctx, &c, prods, before)
	}
	return res, nil
}

// resetStages forgets what the producers timed of their stages.
func resetStages(prods []Producer) {
	for _, p := range prods {
		if sr, ok := p.(stageReporter); ok {
			sr.ResetStages()
		}
	}
}

// scrapeBefore reads the broker's stages at the start of the measured part, nil when
// the run has no metrics address or the scrape fails (the breakdown then counts from
// the broker's start, see componentStages).
func scrapeBefore(ctx context.Context, c *Config) map[string]*stageBuckets {
	if c.MetricsAddr == "" {
		return nil
	}
	b, _ := scrapeStages(ctx, c.MetricsAddr)
	return b
}

// componentStages gathers the components' stages of a run: the first producer's (they
// are alike), and the broker's since before when the run has a metrics address.
func componentStages(ctx context.Context, c *Config, prods []Producer, before map[string]*stageBuckets) map[string]*Latency {
	out := map[string]*Latency{}
	if len(prods) > 0 {
		if sr, ok := prods[0].(stageReporter); ok {
			for name, l := range sr.Stages() {
				if l != nil {
					out[name] = l
				}
			}
		}
	}
	if c.MetricsAddr != "" && (before != nil || c.Warmup == 0) {
		if bs, err := brokerStagesSince(ctx, c.MetricsAddr, before); err == nil {
			for name, l := range bs {
				out[name] = l
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func newConsumers(ctx context.Context, d Driver, c *Config) ([]Consumer, error) {
	cons := make([]Consumer, c.Consumers)
	for i := range cons {
		cs, err := d.NewConsumer(ctx, c, i, len(cons))
		if err != nil {
			closeAll(cons[:i])
			return nil, fmt.Errorf("cannot start consumer: %w", err)
		}
		cons[i] = cs
	}
	return cons, nil
}

// runContext ends at d (if positive) or with ctx.
func runContext(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return context.WithCancel(ctx)
}

func closeAll[T io.Closer](cs []T) {
	for _, c := range cs {
		c.Close()
	}
}

// startProgress prints a progress line every second until the returned stop is called.
func startProgress(w io.Writer, name string, cnt *Counters, rec *Recorder) (stop func()) {
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		start, prevN, prevB, prevT := time.Now(), int64(0), int64(0), time.Now()
		for {
			select {
			case <-done:
				fmt.Fprintln(w)
				return
			case now := <-t.C:
				n, b := cnt.records.Load(), cnt.bytes.Load()
				fmt.Fprint(w, progressLine(name, now.Sub(start), n-prevN, b-prevB, now.Sub(prevT), rec, cnt.errors.Load()))
				prevN, prevB, prevT = n, b, now
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// progressLine formats one live line: rate, MB/s and the interval's p99.
func progressLine(name string, at time.Duration, n, bytes int64, dt time.Duration, rec *Recorder, errs int64) string {
	p99 := "-"
	if rec != nil {
		if v := rec.IntervalP99(); v > 0 {
			p99 = fmtMicros(float64(v) / 1e3)
		}
	}
	s := dt.Seconds()
	return fmt.Sprintf("\r%-8s %6.1fs %11.0f rec/s %9.1f MB/s  p99 %-9s errors %d   ",
		name, at.Seconds(), float64(n)/s, float64(bytes)/s/1e6, p99, errs)
}

// fmtMicros formats a latency given in µs with a unit that suits it.
func fmtMicros(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%.2f s", us/1e6)
	case us >= 1e3:
		return fmt.Sprintf("%.2f ms", us/1e3)
	}
	return fmt.Sprintf("%.0f µs", us)
}
