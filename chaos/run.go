package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"sluice/batch"
	"sluice/chaos/check"
)

// topic is the topic the workload writes.
const topic = "chaos"

// Limits of the phases after the faults.
const (
	healLimit     = 2 * time.Minute // until a record is persisted again after a fault
	readBackLimit = 5 * time.Minute
)

// run is one chaos run: its processes, its history and what it found so far.
type run struct {
	cfg  Config
	ps   *procs
	rng  *rand.Rand
	hist *check.History
	prog progress
	res  *Result
	t0   time.Time
	// clock is how far the producers' clocks are off (ms; the clockjump fault): their
	// records carry timestamps that far from the time they are produced.
	clock atomic.Int64
	// logMu serializes the lines of Config.Log: writers, the consumer and the fault
	// loop all write progress lines.
	logMu sync.Mutex
	// writers are the load's producers (load sets them before the faults start).
	writers []*writer
	dumps   atomic.Int32 // goroutine dumps of slow heals written (dumpGoroutines)
}

// Run runs a chaos run (Config) and returns its result; err is for a run that could not
// start at all. Every process it started is stopped by pid before it returns, also
// when ctx ends early (an interrupted run has no check).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	logs := filepath.Join(cfg.Dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create run directory: %w", err)
	}
	r := &run{cfg: cfg, ps: newProcs(logs), rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5eed)),
		hist: check.NewHistory(), res: &Result{Config: cfg.String()}, t0: time.Now()}
	defer r.ps.stopAll(10 * time.Second)
	var err error
	if cfg.Distributed {
		err = r.distributed(ctx)
	} else {
		err = r.embedded(ctx)
	}
	r.res.Elapsed = time.Since(r.t0)
	if err != nil {
		r.res.Errors = append(r.res.Errors, err.Error())
	}
	return r.res, nil
}

// logf writes one progress line.
func (r *run) logf(format string, args ...any) {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	fmt.Fprintf(r.cfg.Log, "%7.1fs "+format+"\n", append([]any{time.Since(r.t0).Seconds()}, args...)...)
}

// load runs the writers and the live consumer until the returned stop is called; stop
// waits until every writer has closed its producer, then records in the result how many
// producers were replaced and how many records were sent with each codec.
func (r *run) load(addrs func() []string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var ws []*writer
	for i := range r.cfg.Writers {
		w := &writer{index: i, kind: writerKinds[i%len(writerKinds)], rate: r.cfg.Rate, size: r.cfg.ValueSize,
			codecs: r.cfg.Codecs, life: r.cfg.ProducerLife, topic: topic, addrs: addrs, hist: r.hist, prog: &r.prog, log: r.logf, clock: &r.clock}
		ws = append(ws, w)
		wg.Add(1)
		go func() { defer wg.Done(); w.run(ctx) }()
	}
	r.writers = ws
	rd := &reader{topic: topic, addrs: addrs, hist: r.hist, next: map[int]int64{}, prog: &r.prog}
	wg.Add(1)
	go func() { defer wg.Done(); rd.live(ctx, r.logf) }()
	sm := &sampler{topic: topic, addrs: addrs, hist: r.hist, rng: rand.New(rand.NewPCG(uint64(r.cfg.Seed), 0x5a3b1e))}
	wg.Add(1)
	go func() { defer wg.Done(); sm.run(ctx) }()
	return func() {
		cancel()
		wg.Wait()
		r.logf("sampler consumers that read: newest %d, at an offset %d, at a time %d, a logical range %d",
			sm.counts[0].Load(), sm.counts[1].Load(), sm.counts[2].Load(), sm.counts[3].Load())
		r.res.Codecs = map[string]int64{}
		for _, w := range ws {
			r.res.ProducerRestarts += w.restarts.Load()
			for k := range w.sent {
				if n := w.sent[k].Load(); n > 0 {
					r.res.Codecs[batch.Codec(k).String()] += n
				}
			}
		}
	}
}

// clockJump is the clock fault that needs no root: the producers' clocks jump two hours
// to three days back or ahead for 2-5 s, then come back, so that the records of that
// time carry timestamps far from when they are produced (a producer host's clock set by
// hand, or an NTP step). The brokers run with a one-hour retention by age
// (brokerArgs): judged by those timestamps alone, the records of a jump back would be
// deleted as soon as their segment sealed. The brokers' own clocks are not moved:
// that needs CAP_SYS_TIME, and Go programs read the clock through the vDSO, which
// LD_PRELOAD tricks such as libfaketime do not reach.
func (r *run) clockJump(ctx context.Context) (string, error) {
	off := time.Duration(2+r.rng.Int64N(70)) * time.Hour
	if r.rng.IntN(2) == 0 {
		off = -off
	}
	d := 2*time.Second + time.Duration(r.rng.Int64N(int64(3*time.Second)))
	r.clock.Store(off.Milliseconds())
	sleep(ctx, d)
	r.clock.Store(0)
	return fmt.Sprintf("the producers' clocks %s by %v for %v", map[bool]string{true: "ahead", false: "back"}[off > 0],
		off.Abs(), d.Round(time.Millisecond)), nil
}

// weights make the crash faults, which the long run must repeat most (issue 15's
// figures: hundreds of kill -9 cycles), come up more often than the file damage, whose
// every cycle destroys the tail of a partition. A fault missing here weighs 1.
var weights = map[string]int{"kill": 4, "pause": 2, "torn": 1, "bitflip": 1, "diskfull": 1,
	"broker-kill": 3, "broker-pause": 2, "admin-kill": 1, "zk-restart": 1, "hdfs-restart": 1}

// weighted returns each fault as many times as its weight (1 when weights does not
// name it): the list faults are drawn from.
func weighted(faults []string) []string {
	var names []string
	for _, n := range faults {
		w, ok := weights[n]
		if !ok {
			w = 1
		}
		for range w {
			names = append(names, n)
		}
	}
	return names
}

// faultLoop injects faults from mix, one every Interval on average, each at least once
// and then until Duration has passed, or until ctx ends. After each it waits for the workload to persist a record again.
func (r *run) faultLoop(ctx context.Context, mix map[string]func(context.Context) (string, error)) error {
	var injectable []string
	for _, n := range r.cfg.Faults {
		if mix[n] != nil { // the others are skipped: the result says why
			injectable = append(injectable, n)
		}
	}
	names := weighted(injectable)
	// The first cycles go through every fault once, so that a run injects each however
	// short its Duration; then they are drawn by weight until Duration has passed.
	first := slices.Compact(slices.Clone(names))
	r.rng.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
	end := time.Now().Add(r.cfg.Duration)
	for cycle := 0; len(names) > 0 && (cycle < len(first) || time.Now().Before(end)) && ctx.Err() == nil; cycle++ {
		sleep(ctx, r.cfg.Interval/2+time.Duration(r.rng.Int64N(int64(r.cfg.Interval))))
		if ctx.Err() != nil {
			break
		}
		name := names[r.rng.IntN(len(names))]
		if cycle < len(first) {
			name = first[cycle]
		}
		f := r.res.fault(name)
		note, err := mix[name](ctx)
		if err != nil {
			return fmt.Errorf("fault %s, cycle %d: %w", name, f.Cycles+1, err)
		}
		healed := time.Now()
		f.Cycles++
		if note != "" && len(f.Notes) < maxNotes {
			f.Notes = append(f.Notes, note)
		}
		healing, watched := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(watched)
			r.watchHeal(fmt.Sprintf("%s #%d", name, f.Cycles), healed, healing)
		}()
		d, err := r.prog.since(ctx, healed, healLimit)
		close(healing)
		<-watched // no slow-heal line after the heal's own
		if err != nil {
			return fmt.Errorf("after fault %s, cycle %d (%s): %w", name, f.Cycles, note, err)
		}
		f.Recovery = append(f.Recovery, d.Milliseconds())
		r.logf("%s #%d: %s; persisting again after %v", name, f.Cycles, note, d.Round(time.Millisecond))
	}
	return ctx.Err()
}

// slowHeal is how long after a heal the load may take to persist a record before the run
// logs what each writer is doing (loadState): the recovery times are a median of tens of
// milliseconds, and an outlier of seconds is worth a line saying where it waits.
const slowHeal = time.Second

// watchHeal logs the load's state (loadState) slowHeal after the heal, then after
// intervals that double (1, 3, 7, 15 s... with slowHeal at a second), until healing is
// closed: a heal that takes a minute (HDFS back from an outage, in a distributed run)
// logs six lines, not sixty. At its first line it also writes the harness's goroutines,
// the clients' included, to the run's logs (at most maxHealDumps times a run), so that
// where they wait can be read afterwards.
func (r *run) watchHeal(fault string, healed time.Time, healing <-chan struct{}) {
	wait := slowHeal
	t := time.NewTimer(wait)
	defer t.Stop()
	for first := true; ; first = false {
		select {
		case <-healing:
			return
		case <-t.C:
			select {
			case <-healing: // healed as the timer fired
				return
			default:
			}
			wait *= 2
			t.Reset(wait)
			line := r.loadState(healed, time.Now())
			if first {
				if path, ok := r.dumpGoroutines(fault); ok {
					line += "; goroutines in " + path
				}
			}
			r.logf("%s: %s", fault, line)
		}
	}
}

// maxHealDumps bounds the goroutine dumps of slow heals in one run.
const maxHealDumps = 8

// dumpGoroutines writes every goroutine's stack to a file in the run's logs named for
// fault, unless maxHealDumps were written already or the file cannot be written.
func (r *run) dumpGoroutines(fault string) (string, bool) {
	if r.dumps.Add(1) > maxHealDumps {
		return "", false
	}
	name := "goroutines-" + strings.NewReplacer(" ", "", "#", "").Replace(fault) + ".txt"
	path := filepath.Join(r.cfg.Dir, "logs", name)
	f, err := os.Create(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	if err := pprof.Lookup("goroutine").WriteTo(f, 2); err != nil {
		return "", false
	}
	return path, true
}

// loadState says, as of now, how long ago the last record was persisted and the live
// consumer last read, and what each writer is doing.
func (r *run) loadState(healed, now time.Time) string {
	ago := func(ns int64) string {
		if ns <= healed.UnixNano() {
			return "not since the heal"
		}
		return time.Duration(now.UnixNano()-ns).Round(time.Millisecond).String() + " ago"
	}
	lastRead := r.prog.lastRead()
	states := make([]string, 0, len(r.writers))
	for _, w := range r.writers {
		states = append(states, w.state(now))
	}
	return fmt.Sprintf("no record persisted %v after the heal (last persisted %s, last read %s); %s",
		now.Sub(healed).Round(time.Millisecond), ago(r.prog.last.Load()), ago(lastRead), strings.Join(states, "; "))
}

// finish stops the load, reads everything back and runs the checker.
func (r *run) finish(ctx context.Context, stop func(), addrs []string) error {
	r.logf("stopping the load")
	stop()
	sent, reads := r.hist.Len()
	r.logf("load stopped: %d records sent, %d reads; reading everything back", sent, reads)
	if err := readBack(ctx, topic, addrs, r.hist, readBackLimit); err != nil {
		return err
	}
	r.res.Report = check.Check(r.hist)
	return nil
}
