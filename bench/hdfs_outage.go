package bench

import (
	"context"
	"fmt"
	"time"
)

// Outage is the outage run: producers at a fixed rate to a broker shipping to HDFS, the
// MiniDFSCluster killed (SIGKILL) and started again on its data at the same port, and
// the broker's HDFS metrics sampled throughout.
type Outage struct {
	Rate      float64 `json:"rate"` // records/s of 1 KiB, over Producers
	Producers int     `json:"producers"`
	// KilledAt is how long after the producers started HDFS was killed; Down how long
	// it stayed down before it was started again; Restart how long that start took
	// until the cluster was ready (HDFS "returned" at its end).
	KilledAt float64 `json:"killed_at_seconds"`
	Down     float64 `json:"down_seconds"`
	Restart  float64 `json:"restart_seconds"`
	CatchUp  CatchUp `json:"catch_up"`
	// Done is false when the backlog was not gone within the run's bound.
	Done    bool          `json:"done"`
	Produce *Result       `json:"produce,omitempty"`
	Samples []HDFSSample  `json:"samples"`
	Bound   time.Duration `json:"bound_ns"` // of the wait for the catch-up after the return
}

// outage runs the outage measurement against a fresh broker shipping to HDFS.
func (r *hdfsRun) outage(ctx context.Context) error {
	srv, stop, err := r.startBroker(ctx, "outage", "/sluice-outage")
	if err != nil {
		return err
	}
	defer stop()
	o := &Outage{Rate: r.sz.outageRate, Producers: r.sz.outageWriters, Bound: r.sz.tail}
	r.b.Outage = o
	c := baseConfig("sluice", srv.Addr, "outage", 1024)
	c.Producers, c.Rate = o.Producers, o.Rate
	// The producers go on for about 40 s after HDFS is back, as the ad hoc run did (10 s,
	// 60 s down, 30 s), so the catch-up competes with their own catch-up; the sampling
	// goes on until the backlog is gone.
	c.Duration = r.sz.lead + r.sz.outage + 40*time.Second
	sp := sampleHDFS(ctx, srv.MetricsAddr, r.sz.sampleEvery)
	defer sp.Stop()
	type result struct {
		r   *Result
		err error
	}
	produced := make(chan result, 1)
	start := time.Now()
	go func() {
		res, err := produceGuarded(ctx, srv, r.o.Work, c)
		produced <- result{res, err}
	}()
	back, err := r.killAndReturn(ctx, o, start)
	if err == nil {
		r.waitCaughtUp(ctx, sp, back, o)
	}
	p := <-produced // the producers end at c.Duration, or with ctx
	o.Samples = sp.Stop()
	o.CatchUp, o.Done = catchUp(o.Samples, back)
	if err != nil {
		return err
	}
	if p.err != nil {
		return fmt.Errorf("outage produce: %w", p.err)
	}
	o.Produce = p.r
	r.logf("outage   %s", Summary(p.r))
	r.logf("outage   shipping resumed %.1fs after HDFS's return, backlog gone after %.1fs: %.0f MB in %.1fs, %.0f MB/s (peak backlog %.0f MB)",
		o.CatchUp.Resumed, o.CatchUp.Gone, o.CatchUp.Shipped/1e6, o.CatchUp.Seconds, o.CatchUp.MBPerSec(), o.CatchUp.PeakBacklog/1e6)
	if !o.Done {
		return fmt.Errorf("the backlog was not gone %v after HDFS's return", r.sz.tail)
	}
	return nil
}

// killAndReturn waits for the lead time, kills the cluster, keeps it down for the
// outage's length and starts it again; it returns when the cluster was ready again.
func (r *hdfsRun) killAndReturn(ctx context.Context, o *Outage, start time.Time) (time.Time, error) {
	if err := sleepCtx(ctx, r.sz.lead); err != nil {
		return time.Time{}, err
	}
	pid := r.dfs.Pid()
	r.dfs.Kill()
	killed := time.Now()
	o.KilledAt = killed.Sub(start).Seconds()
	r.logf("outage   HDFS (pid %d) killed with SIGKILL %.1fs in; down for %v", pid, o.KilledAt, r.sz.outage)
	if err := sleepCtx(ctx, r.sz.outage); err != nil {
		return time.Time{}, err
	}
	restart := time.Now()
	o.Down = restart.Sub(killed).Seconds()
	if err := r.dfs.StartAgain(); err != nil {
		return time.Time{}, fmt.Errorf("cannot start HDFS again: %w", err)
	}
	back := time.Now()
	o.Restart = back.Sub(restart).Seconds()
	r.logf("outage   HDFS back (pid %d) after %.1fs down and %.1fs of start", r.dfs.Pid(), o.Down, o.Restart)
	return back, nil
}

// waitCaughtUp polls the samples until the backlog is gone, the bound passes or ctx
// ends.
func (r *hdfsRun) waitCaughtUp(ctx context.Context, sp *sampler, back time.Time, o *Outage) {
	deadline := back.Add(r.sz.tail)
	for time.Now().Before(deadline) {
		if _, done := catchUp(sp.Samples(), back); done {
			return
		}
		if sleepCtx(ctx, time.Second) != nil {
			return
		}
	}
}

// sleepCtx sleeps for d or until ctx ends (then it returns ctx's error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
