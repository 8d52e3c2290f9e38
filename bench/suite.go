package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// SuiteOptions configure the suite that `make bench` runs.
type SuiteOptions struct {
	Quick bool // smaller counts and shorter runs (make bench-quick)
	// NewOnly runs only the disk ceilings and the sustained runs (with the copy count),
	// not the burst, consume and latency runs nor the loopback ceilings.
	NewOnly bool
	// Only, when not empty, runs only these parts (and what they need), for narrow runs
	// on a shared host: "latency" (the 1 KiB produce run that sets the half rate, then
	// the e2e runs), "consume" (the 1 KiB produce run, the two consume runs and their
	// ceilings), "produce" (both produce runs and their ceilings). The sustained runs
	// and the disk ceilings run only without Only (or with NewOnly).
	Only []string
	// Systems, when not empty, limits the servers started to these names.
	Systems   []string
	Work      string // scratch directory for data and logs
	SluiceBin string
	NATSBin   string // nats-server binary; empty skips NATS
	KafkaDir  string // directory with lib/ and log4j2.properties; empty skips Kafka
	Log       io.Writer
}

// Suite holds the results of a suite run, by system and measurement name.
type Suite struct {
	Quick   bool                          `json:"quick"`
	Start   time.Time                     `json:"start"`
	Results map[string]map[string]*Result `json:"results"`
	// Rounds holds every round of each end-to-end measurement, by system and
	// measurement, in run order; Results holds the kept round's whole result
	// (keepMedianRound).
	Rounds  map[string]map[string][]*Round `json:"latency_rounds,omitempty"`
	RSS     map[string]int64               `json:"rss_bytes"`
	Skipped map[string]string              `json:"skipped,omitempty"`
	Machine Machine                        `json:"machine"`
	NewOnly bool                           `json:"new_only,omitempty"`
	// Only and Systems are SuiteOptions' subsets, when the run was narrowed.
	Only    []string `json:"only,omitempty"`
	Systems []string `json:"systems,omitempty"`
	// Disk holds the disk ceilings (buffered, direct) on the data directory's filesystem;
	// DirtyLimit the host's dirty-page limit they were sized by; DiskNote how.
	Disk       []*DiskResult `json:"disk,omitempty"`
	DirtyLimit int64         `json:"dirty_limit_bytes,omitempty"`
	DiskNote   string        `json:"disk_note,omitempty"`
	// Copies is the sluice broker's user-space copies per produced byte over the
	// sustained 1 KiB run.
	Copies *CopyCount `json:"copies,omitempty"`
	// MemoryPaths is where the sluice broker served its consume-from-memory rounds from
	// (its fetch bytes by path over them).
	MemoryPaths *FetchPaths `json:"consume_memory_paths,omitempty"`
	// Load is the host's load average (1, 5, 15 min) at the start and at the end.
	LoadStart string `json:"load_start,omitempty"`
	LoadEnd   string `json:"load_end,omitempty"`

	workDir string // the data directories' parent, for free-space checks
}

func (s *Suite) put(system, name string, r *Result) {
	if s.Results[system] == nil {
		s.Results[system] = map[string]*Result{}
	}
	r.Name = name
	s.Results[system][name] = r
}

// The measurement names.
const (
	MProduce1K   = "produce-1k"
	MProduce100  = "produce-100"
	MConsumeMem  = "consume-memory"
	MConsumePage = "consume-pagecache"
	// MConsumeRestart is the consume right after a restart, from whatever the server left
	// in the page cache; MConsumePage follows it, with the files read first (warm.go).
	MConsumeRestart = "consume-restart"
	ME2EHalf        = "e2e-half"
	ME2EHalf1P      = "e2e-half-1p" // one partition
	ME2E10K         = "e2e-10k"     // a fixed 10 000 records/s, the same for every system
)

// e2eRate10K is the fixed rate of ME2E10K.
const e2eRate10K = 10_000

// has reports whether the suite runs part (see SuiteOptions.Only).
func (o *SuiteOptions) has(part string) bool {
	return len(o.Only) == 0 || slices.Contains(o.Only, part)
}

// runs reports whether the suite starts server name (see SuiteOptions.Systems).
func (o *SuiteOptions) runs(name string) bool {
	return len(o.Systems) == 0 || slices.Contains(o.Systems, name)
}

// sizes of a suite run.
type suiteSizes struct {
	count1K, count100 int64
	cap               time.Duration // bound of each produce and consume run
	e2e, warmup       time.Duration
	// e2eRounds is how many times each end-to-end measurement runs on every system; the
	// report keeps the round of sluice's median p99 (rounds.go).
	e2eRounds int
	// A sustained run lasts sustainMin and sustainBytes, whichever is later, at most
	// sustainMax.
	sustainMin, sustainMax time.Duration
	sustainBytes           int64
	// diskQuick, when set, replaces 3× the dirty limit as the disk ceilings' total.
	diskQuick int64
	diskCap   time.Duration // bound of each disk ceiling run
}

func sizesOf(quick bool) suiteSizes {
	if quick {
		return suiteSizes{count1K: 400_000, count100: 2_000_000, cap: 8 * time.Second, e2e: 4 * time.Second, warmup: time.Second, e2eRounds: 1,
			sustainMin: 10 * time.Second, sustainMax: 15 * time.Second, sustainBytes: 2e9, diskQuick: 1 << 30, diskCap: 30 * time.Second}
	}
	return suiteSizes{count1K: 2_000_000, count100: 10_000_000, cap: 30 * time.Second, e2e: 10 * time.Second, warmup: 2 * time.Second, e2eRounds: 3,
		sustainMin: 60 * time.Second, sustainMax: 120 * time.Second, sustainBytes: 20e9, diskCap: 3 * time.Minute}
}

// Common settings of every system's workloads (stated in the report).
const (
	suitePartitions = 4
	suiteBatch      = 1 << 20
	suiteLinger     = 5 * time.Millisecond
	e2eLinger       = 200 * time.Microsecond
	// e2eRetention and e2eSegment are the end-to-end topics' retention per partition and
	// segment size (sluice and Kafka; NATS the stream's MaxBytes). 4 GiB keeps more than
	// 5 s of one partition at sluice's half load (about 760 MB/s): a consumer that falls
	// seconds behind on an overloaded host reads late, not past retention (with 1 GiB, a
	// round that lagged 1.2 s lost 411 553 records to it, 2026-12-04).
	e2eRetention = 4 << 30
	e2eSegment   = 64 << 20
)

// RunSuite runs every workload against every system it can start and the ceilings.
func RunSuite(ctx context.Context, o SuiteOptions) (*Suite, error) {
	s := &Suite{Quick: o.Quick, NewOnly: o.NewOnly, Only: o.Only, Systems: o.Systems, Start: time.Now(), Results: map[string]map[string]*Result{},
		RSS: map[string]int64{}, Skipped: map[string]string{}, Machine: DescribeMachine(), LoadStart: loadAvg(), workDir: o.Work}
	defer func() { s.LoadEnd = loadAvg() }()
	sz := sizesOf(o.Quick)
	logf := func(format string, args ...any) { fmt.Fprintf(o.Log, format+"\n", args...) }

	servers := []*Server{SluiceServer(o.SluiceBin, filepath.Join(o.Work, "sluice", "data"), "127.0.0.1:19440", "never")}
	if o.NATSBin != "" {
		servers = append(servers, NATSServer(o.NATSBin, filepath.Join(o.Work, "nats", "data"), "127.0.0.1:14222", false))
	} else {
		s.Skipped["nats"] = "no nats-server given"
	}
	if o.KafkaDir != "" {
		servers = append(servers, KafkaServer(o.KafkaDir, filepath.Join(o.Work, "kafka", "data"), "127.0.0.1:19092"))
	} else {
		s.Skipped["kafka"] = "no Kafka jars given"
	}
	// The loopback ceilings run right after sluice's runs, before its sustained runs and
	// the other systems: the ratios to them are goals, and this host's speed swings
	// several-fold within minutes (BENCHMARKS.md), so a ceiling measured after every
	// system, up to ten minutes later, said more about the host's minute than about
	// sluice. Without sluice they run last.
	ceilingsDone := false
	ceilings := func() {
		ceilingsDone = true
		logf("== ceilings")
		if err := runCeilings(ctx, s, &o, filepath.Join(o.Work, "ceiling"), sz, logf); err != nil {
			s.Skipped["ceiling"] = err.Error()
		}
	}
	// The disk ceilings first, in a directory beside the data directories (the same
	// filesystem), on a disk no server is writing to.
	full := len(o.Only) == 0
	if full || o.NewOnly {
		logf("== disk ceilings")
		if err := runDiskCeilings(ctx, s, filepath.Join(o.Work, "disk"), sz, logf); err != nil {
			s.Skipped["disk ceilings"] = err.Error()
			logf("disk ceilings failed: %v", err)
		}
	}
	for _, srv := range servers {
		if !o.runs(srv.Name) {
			s.Skipped[srv.Name] = "not in -systems"
			continue
		}
		os.RemoveAll(filepath.Dir(srv.Dir))
		logf("== %s: starting", srv.Name)
		if err := srv.Start(ctx); err != nil {
			s.Skipped[srv.Name] = err.Error()
			logf("%s skipped: %v", srv.Name, err)
			continue
		}
		if !o.NewOnly {
			// The ceilings of sluice's consume runs run beside them (pagepair.go).
			var pc *ceilingsBeside
			if srv.Name == "sluice" && o.has("consume") {
				pc = &ceilingsBeside{dir: filepath.Join(o.Work, "ceiling-page"), sz: sz}
			}
			err := runSystem(ctx, s, &o, srv, pc, sz, logf)
			if pc != nil {
				pc.finish(s, consumeRounds)
			}
			srv.Stop()
			s.RSS[srv.Name] = srv.PeakRSS
			if err != nil {
				s.Skipped[srv.Name] = err.Error()
				logf("%s failed: %v", srv.Name, err)
			}
			if srv.Name == "sluice" && ctx.Err() == nil {
				ceilings()
			}
		}
		if ctx.Err() == nil && (full || o.NewOnly) {
			logf("== %s: sustained runs", srv.Name)
			if err := runSustained(ctx, s, srv, sz, logf); err != nil {
				s.Skipped[srv.Name+" sustained"] = err.Error()
				logf("%s sustained failed: %v", srv.Name, err)
			}
		}
		srv.Stop()
		os.RemoveAll(srv.Dir)
		if ctx.Err() != nil {
			return s, ctx.Err()
		}
	}
	if !o.NewOnly && !ceilingsDone {
		ceilings()
	}
	if !o.NewOnly && o.has("latency") && ctx.Err() == nil {
		logf("== end-to-end latency, the systems side by side")
		if err := runLatency(ctx, s, &o, servers, filepath.Join(o.Work, "relay"), sz, logf); err != nil {
			return s, err
		}
	}
	return s, ctx.Err()
}

// runDiskCeilings measures buffered and O_DIRECT writes in dir, which lies on the data
// directories' filesystem, sized by the dirty limit and the free space.
func runDiskCeilings(ctx context.Context, s *Suite, dir string, sz suiteSizes, logf func(string, ...any)) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	total, dirty, note, err := DiskTarget(dir, sz.diskQuick)
	if err != nil {
		return err
	}
	s.DirtyLimit, s.DiskNote = dirty, note
	if total < diskSyncEvery {
		return fmt.Errorf("no room for a disk ceiling: %s", note)
	}
	for _, mode := range []string{DiskBuffered, DiskDirect} {
		r, err := DiskCeiling(ctx, DiskOptions{Dir: dir, Mode: mode, Total: total, Cap: sz.diskCap})
		if err != nil {
			return err
		}
		s.Disk = append(s.Disk, r)
		logf("disk     %-18s %.1f GiB in %.1fs: %.0f MB/s (%.0f MB/s before the final fdatasync)%s",
			mode, float64(r.Bytes)/(1<<30), r.Seconds, r.MBPerSec, r.WriteMBPerSec, notePrefix(r.Note))
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// loadAvg returns the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// ceilingConfig is a ceiling's run of count records of rec bytes, its file (sendfile) in
// dir, bounded by limit.
func ceilingConfig(system, dir string, rec int, count int64, limit time.Duration, fromStart bool) Config {
	c := baseConfig(system, dir, "c1k", rec)
	c.Count, c.Duration, c.FromStart = count, limit, fromStart
	return c
}

func baseConfig(system, addr, topic string, recSize int) Config {
	return Config{System: system, Broker: addr, Topic: topic, RecordSize: recSize, BatchBytes: suiteBatch,
		Linger: suiteLinger, Partitions: suitePartitions, Producers: 1, Consumers: 1}
}

// runSystem runs the throughput workloads against one started server: produce (1 KiB,
// then 100 B), consume what was produced from the start (memory, or whatever the system
// reads from), restart the server, consume again (page cache). The end-to-end runs come
// later, every system's side by side (runLatency). With o.Only, only the parts asked for
// and the 1 KiB produce run they need (its rate sets the end-to-end runs' half load).
func runSystem(ctx context.Context, s *Suite, o *SuiteOptions, srv *Server, pc *ceilingsBeside, sz suiteSizes, logf func(string, ...any)) error {
	name := srv.Name
	measure := func(m, w string, c Config) (*Result, error) {
		c.ServerPid = srv.Pid()
		r, err := Run(ctx, w, c, nil)
		srv.SampleRSS()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m, err)
		}
		return r, nil
	}
	run := func(m, w string, c Config) (*Result, error) {
		r, err := measure(m, w, c)
		if err != nil {
			return nil, err
		}
		s.put(name, m, r)
		logf("%-8s %-18s %s", name, m, Summary(r))
		return r, nil
	}
	c := baseConfig(name, srv.Addr, "b1k", 1024)
	c.Count, c.Duration = sz.count1K, sz.cap
	p1k, err := run(MProduce1K, "produce", c)
	if err != nil {
		return err
	}
	if o.has("consume") {
		cc := c
		cc.FromStart, cc.Count = true, p1k.Records
		// From memory: the first read of what was just produced, then the same again
		// (sluice's arena keeps it; the broker's fetch counters, read around the rounds,
		// say whether it did), consumeRounds runs, the median kept. With pc, a round of the tcp
		// ceiling runs beside each, as the sendfile rounds do below.
		var mem []*Result
		var before *FetchPaths
		if name == "sluice" && srv.MetricsAddr != "" {
			if b, err := scrapeFetchPaths(ctx, srv.MetricsAddr); err == nil {
				before = &b
			} else {
				logf("%s: %v (the report will not say where consume from memory was served from)", name, err)
			}
		}
		var tcpRound func()
		if pc != nil {
			tcpRound = func() { pc.tcpRound(ctx, s, logf) }
		}
		err = alternate(consumeRounds, false, func(i int) error {
			r, err := measure(MConsumeMem, "consume", cc)
			if err != nil {
				return err
			}
			logf("%-8s %-18s round %d: %s", name, MConsumeMem, i+1, Summary(r))
			mem = append(mem, r)
			return nil
		}, tcpRound)
		if err != nil {
			return err
		}
		s.put(name, MConsumeMem, medianRun(mem))
		if before != nil {
			if after, err := scrapeFetchPaths(ctx, srv.MetricsAddr); err == nil {
				d := after.since(*before)
				s.MemoryPaths = &d
			} else {
				logf("%s: %v (the report will not say where consume from memory was served from)", name, err)
			}
		}
		if err := srv.Restart(ctx); err != nil {
			return err
		}
		if _, err := run(MConsumeRestart, "consume", cc); err != nil {
			return err
		}
		// Restarted again before each run, so that nothing the last run left in the
		// server's own memory serves this one, and its files read into the page cache
		// (warm.go). consumeRounds runs, the median kept (median.go). With pc, a round of
		// the sendfile ceiling runs beside each, before it in odd rounds and after it in
		// even ones, so that neither side always follows the other.
		var rs []*Result
		var pageRound func()
		if pc != nil {
			pageRound = func() { pc.pageRound(ctx, s, logf) }
		}
		err = alternate(consumeRounds, true, func(i int) error {
			if err := srv.Restart(ctx); err != nil {
				return err
			}
			n, err := warmFiles(srv.Dir)
			if err != nil {
				return fmt.Errorf("%s: %w", MConsumePage, err)
			}
			cc.ServerPid = srv.Pid()
			r, err := Run(ctx, "consume", cc, nil)
			srv.SampleRSS()
			if err != nil {
				return fmt.Errorf("%s: %w", MConsumePage, err)
			}
			logf("%-8s %-18s round %d (%d MB of files read first): %s", name, MConsumePage, i+1, n/1e6, Summary(r))
			rs = append(rs, r)
			return nil
		}, pageRound)
		if err != nil {
			return err
		}
		s.put(name, MConsumePage, medianRun(rs))
	}
	if o.has("produce") {
		c100 := baseConfig(name, srv.Addr, "b100", 100)
		c100.Count, c100.Duration = sz.count100, sz.cap
		if _, err := run(MProduce100, "produce", c100); err != nil {
			return err
		}
	}
	return nil
}

// runCeilings measures the ceilings: tcp for produce and consume from memory, sendfile
// for consume from the page cache (the file is written by the sendfile producer first).
func runCeilings(ctx context.Context, s *Suite, o *SuiteOptions, dir string, sz suiteSizes, logf func(string, ...any)) error {
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	type step struct {
		system, m, w string
		rec          int
		count        int64
		fromStart    bool
	}
	steps := []step{
		{"tcp", MProduce1K, "produce", 1024, sz.count1K, false},
		{"tcp", MProduce100, "produce", 100, sz.count100, false},
		{"tcp", MConsumeMem, "consume", 1024, sz.count1K, true},
		{"sendfile", MProduce1K, "produce", 1024, sz.count1K, false},
		{"sendfile", MConsumePage, "consume", 1024, sz.count1K, true},
	}
	for _, st := range steps {
		needed := o.has("produce") && st.w == "produce" ||
			o.has("consume") && (st.m == MConsumeMem || st.m == MConsumePage || st.system == "sendfile")
		// Measured beside sluice's runs already (pagepair.go).
		beside := st.system == "sendfile" && s.pagePaired() || st.system == "tcp" && st.m == MConsumeMem && s.tcpBeside()
		if !needed || beside {
			continue
		}
		c := ceilingConfig(st.system, dir, st.rec, st.count, sz.cap, st.fromStart)
		rounds := 1
		if st.m == MConsumePage || st.m == MConsumeMem {
			rounds = consumeRounds // as the systems' runs it is compared with
		}
		var rs []*Result
		for i := range rounds {
			r, err := Run(ctx, st.w, c, nil)
			if err != nil {
				return fmt.Errorf("%s %s: %w", st.system, st.m, err)
			}
			logf("%-8s %-18s round %d: %s", st.system, st.m, i+1, Summary(r))
			rs = append(rs, r)
		}
		if rounds == 1 {
			s.put(st.system, st.m, rs[0])
		} else {
			s.put(st.system, st.m, medianRun(rs))
		}
	}
	return nil
}
