package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"sluice/internal/peer"
	"sluice/internal/peer/hdfstest"
	"sluice/persist/hdfs"
)

// The HDFS tier's benchmarks (make bench-hdfs): one MiniDFSCluster, and in the same run
// the raw colinmarc/hdfs write and read rates, sustained produce to a broker without and
// with HDFS shipping, the HDFS lag at half load, the catch-up after an outage, and cold
// reads through the reader; every figure a ratio against a ceiling or peer measured in
// this run.

// HDFSOptions configure the HDFS benchmarks.
type HDFSOptions struct {
	Quick     bool          // shorter runs and a shorter outage (make bench-hdfs QUICK=1)
	Outage    time.Duration // how long HDFS stays down; 0: 60 s (15 s quick)
	Work      string        // scratch directory: HDFS's data, the brokers' data and logs
	SluiceBin string
	Log       io.Writer
}

// HDFSBench holds the results of one run of the HDFS benchmarks.
type HDFSBench struct {
	Quick     bool      `json:"quick"`
	Start     time.Time `json:"start"`
	Machine   Machine   `json:"machine"`
	LoadStart string    `json:"load_start,omitempty"`
	LoadEnd   string    `json:"load_end,omitempty"`
	// RawWrite and RawRead are colinmarc/hdfs's own rates on this cluster (the ceilings).
	RawWrite  hdfs.Rate `json:"raw_write"`
	RawRead   hdfs.Rate `json:"raw_read"`
	RawFile   int64     `json:"raw_file_bytes"`
	RawRounds int       `json:"raw_rounds"`
	// Local and WithHDFS are the sustained produce rounds, in the order run (alternating).
	Local    []*Result `json:"local"`
	WithHDFS []*Result `json:"with_hdfs"`
	// HalfLoad is the rate-limited produce run at half the mean with-HDFS rate; Lag the
	// largest partition lag sampled during it.
	HalfLoad *Result  `json:"half_load,omitempty"`
	Lag      LagStats `json:"lag"`
	Outage   *Outage  `json:"outage,omitempty"`
	// ReadReader and ReadRaw are the cold reads through the reader and raw, same file.
	ReadReader hdfs.Rate `json:"read_reader"`
	ReadRaw    hdfs.Rate `json:"read_raw"`
	// Skipped says which steps failed or were not run, and why.
	Skipped map[string]string `json:"skipped,omitempty"`
}

// hdfsSizes are the sizes of a run.
type hdfsSizes struct {
	rawFile       int64 // each raw file
	rawRounds     int   // raw write (and read) rounds of 2 files, alternating with the sustained rounds
	sustain       time.Duration
	lagRun        time.Duration
	lead, outage  time.Duration // producing before the kill; HDFS down
	tail          time.Duration // bound of the wait for the catch-up after HDFS's return
	read          int64
	readPasses    int
	sampleEvery   time.Duration
	outageRate    float64 // records/s of the outage run
	outageWriters int
}

func hdfsSizesOf(quick bool, outage time.Duration) hdfsSizes {
	sz := hdfsSizes{rawFile: 256 << 20, rawRounds: 2, sustain: 20 * time.Second, lagRun: 30 * time.Second,
		lead: 10 * time.Second, outage: 60 * time.Second, tail: 2 * time.Minute, read: 32e6, readPasses: 3,
		sampleEvery: 250 * time.Millisecond, outageRate: 50_000, outageWriters: 4}
	if quick {
		sz.rawFile, sz.sustain, sz.lagRun, sz.lead, sz.outage, sz.tail, sz.readPasses =
			64<<20, 8*time.Second, 10*time.Second, 5*time.Second, 15*time.Second, time.Minute, 1
	}
	if outage > 0 {
		sz.outage = outage
	}
	return sz
}

// hdfsRun is the state of one run: the cluster, the connection for the raw ceilings and
// where things go.
type hdfsRun struct {
	o    HDFSOptions
	b    *HDFSBench
	sz   hdfsSizes
	dfs  *hdfstest.Cluster
	conn *hdfs.Conn
	logf func(string, ...any)
}

// RunHDFS runs the HDFS benchmarks. Every process it starts (the MiniDFSCluster, the
// brokers) is stopped by its pid before it returns, also on error or when ctx ends.
func RunHDFS(ctx context.Context, o HDFSOptions) (*HDFSBench, error) {
	b := &HDFSBench{Quick: o.Quick, Start: time.Now(), Machine: DescribeMachine(), LoadStart: loadAvg(), Skipped: map[string]string{}}
	defer func() { b.LoadEnd = loadAvg() }()
	r := &hdfsRun{o: o, b: b, sz: hdfsSizesOf(o.Quick, o.Outage), logf: func(f string, a ...any) { fmt.Fprintf(o.Log, f+"\n", a...) }}
	b.RawFile, b.RawRounds = r.sz.rawFile, r.sz.rawRounds
	dir := filepath.Join(o.Work, "dfs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return b, err
	}
	r.logf("== HDFS: starting a MiniDFSCluster")
	dfs, err := hdfstest.Run(dir)
	if err != nil {
		return b, fmt.Errorf("cannot start HDFS: %w", err)
	}
	defer dfs.Stop()
	r.dfs = dfs
	conn, err := hdfs.NewConn(hdfs.Options{Addresses: []string{dfs.Addr}, User: "sluice", Timeout: time.Minute})
	if err != nil {
		return b, err
	}
	defer conn.Close()
	r.conn = conn
	r.logf("HDFS at %s (pid %d)", dfs.Addr, dfs.Pid())
	return b, r.steps(ctx)
}

// steps runs the measurements in order; a failed step is noted and the next one runs,
// except for what later steps need (the sustained rates set the half load).
func (r *hdfsRun) steps(ctx context.Context) error {
	if err := r.sustained(ctx); err != nil {
		return err
	}
	for _, st := range []struct {
		name string
		run  func(context.Context) error
	}{{"half load", r.halfLoad}, {"outage", r.outage}, {"cold read", r.coldRead}} {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.logf("== %s", st.name)
		if err := st.run(ctx); err != nil {
			r.b.Skipped[st.name] = err.Error()
			r.logf("%s failed: %v", st.name, err)
		}
	}
	return ctx.Err()
}

// rawRound writes two raw files and reads them back, adding to the ceilings.
func (r *hdfsRun) rawRound(ctx context.Context, i int) error {
	dir := fmt.Sprintf("/raw-%d", i)
	w, err := hdfs.RawWrite(ctx, r.conn, dir, 2*r.sz.rawFile, r.sz.rawFile)
	if err != nil {
		return fmt.Errorf("raw write: %w", err)
	}
	rd, err := hdfs.RawRead(ctx, r.conn, dir)
	if err != nil {
		return fmt.Errorf("raw read: %w", err)
	}
	r.logf("raw      write %.0f MB/s, read %.0f MB/s (%d MiB)", w.MBPerSec(), rd.MBPerSec(), w.Bytes>>20)
	b := r.b
	b.RawWrite.Bytes, b.RawWrite.Seconds = b.RawWrite.Bytes+w.Bytes, b.RawWrite.Seconds+w.Seconds
	b.RawRead.Bytes, b.RawRead.Seconds = b.RawRead.Bytes+rd.Bytes, b.RawRead.Seconds+rd.Seconds
	return nil
}

// sustained alternates raw rounds with produce rounds to a local-only broker and to one
// shipping to HDFS: raw, local, HDFS, raw, local, HDFS.
func (r *hdfsRun) sustained(ctx context.Context) error {
	r.logf("== raw colinmarc/hdfs and sustained produce, alternating")
	for i := range r.sz.rawRounds {
		if err := r.rawRound(ctx, i); err != nil {
			return err
		}
		for _, withHDFS := range []bool{false, true} {
			res, err := r.produceRound(ctx, withHDFS, i)
			if err != nil {
				return err
			}
			if withHDFS {
				r.b.WithHDFS = append(r.b.WithHDFS, res)
			} else {
				r.b.Local = append(r.b.Local, res)
			}
		}
	}
	return nil
}

// startBroker starts a sluice broker on a free loopback port with its data in a
// directory of its own under the work directory, shipping to HDFS under root when root
// is set; stop stops it and deletes its directory.
func (r *hdfsRun) startBroker(ctx context.Context, name, root string) (srv *Server, stop func(), err error) {
	port, err := peer.FreePort()
	if err != nil {
		return nil, nil, err
	}
	dir := filepath.Join(r.o.Work, name, "data")
	// The broker's default fsync policy (group), as a distributed deployment keeps it.
	srv = SluiceServer(r.o.SluiceBin, dir, fmt.Sprintf("127.0.0.1:%d", port), "group")
	if root != "" {
		argv := srv.argv
		srv.argv = func() []string { return append(argv(), "-hdfs.addr", r.dfs.Addr, "-hdfs.root", root) }
	}
	if err := srv.Start(ctx); err != nil {
		return nil, nil, err
	}
	return srv, func() {
		srv.Stop()
		os.RemoveAll(filepath.Dir(dir))
	}, nil
}

// produceRound is one sustained produce run against a fresh broker, local only or
// shipping to HDFS; the broker and its data are gone afterwards.
func (r *hdfsRun) produceRound(ctx context.Context, withHDFS bool, i int) (*Result, error) {
	name, root := fmt.Sprintf("local-%d", i), ""
	if withHDFS {
		name, root = fmt.Sprintf("hdfs-%d", i), fmt.Sprintf("/sluice-sustain-%d", i)
	}
	srv, stop, err := r.startBroker(ctx, name, root)
	if err != nil {
		return nil, err
	}
	defer stop()
	c := baseConfig("sluice", srv.Addr, "sustain", 1024)
	c.Duration = r.sz.sustain
	res, err := produceGuarded(ctx, srv, r.o.Work, c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	res.Name = name
	r.logf("%-8s %s%s", name, Summary(res), notePrefix(res.Note))
	if res.Errors > 0 {
		return nil, fmt.Errorf("%s: %d errors, the first: %s", name, res.Errors, res.FirstError)
	}
	return res, nil
}

// halfLoad produces at half the mean with-HDFS rate to a fresh broker shipping to HDFS,
// sampling its lag.
func (r *hdfsRun) halfLoad(ctx context.Context) error {
	srv, stop, err := r.startBroker(ctx, "half", "/sluice-half")
	if err != nil {
		return err
	}
	defer stop()
	c := baseConfig("sluice", srv.Addr, "half", 1024)
	c.Duration, c.Rate = r.sz.lagRun, meanOf(r.b.WithHDFS, func(x *Result) float64 { return x.RecordsPerSec })/2
	sp := sampleHDFS(ctx, srv.MetricsAddr, r.sz.sampleEvery)
	res, err := produceGuarded(ctx, srv, r.o.Work, c)
	samples := sp.Stop()
	if err != nil {
		return err
	}
	r.b.HalfLoad, r.b.Lag = res, lagStats(samples)
	r.logf("half     %s; lag p50 %.3fs p99 %.3fs max %.3fs (%d samples)", Summary(res), r.b.Lag.P50, r.b.Lag.P99, r.b.Lag.Max, r.b.Lag.Samples)
	return nil
}

// coldRead compares a cold read through the reader with a raw read of the same file.
func (r *hdfsRun) coldRead(ctx context.Context) error {
	rd, raw, err := hdfs.ReadCold(ctx, r.conn, "/read/t/0", r.sz.read, r.sz.readPasses)
	if err != nil {
		return err
	}
	r.b.ReadReader, r.b.ReadRaw = rd, raw
	r.logf("read     reader %.0f MB/s, raw %.0f MB/s", rd.MBPerSec(), raw.MBPerSec())
	return nil
}

// meanOf returns the mean of f over rs, 0 for none.
func meanOf(rs []*Result, f func(*Result) float64) float64 {
	if len(rs) == 0 {
		return 0
	}
	var sum float64
	for _, x := range rs {
		sum += f(x)
	}
	return sum / float64(len(rs))
}
