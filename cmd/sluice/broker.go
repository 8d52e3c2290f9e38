package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sluice/broker"
	"sluice/memarena"
	"sluice/persist/local"
)

// brokerFlags are the broker's flags; a config file (key = value lines) sets the same
// keys, and flags given on the command line win.
type brokerFlags struct {
	fs        *flag.FlagSet
	config    string
	readyFile string
	metrics   string
	pprof     bool
	public    bool // -metrics.public
	insecure  bool
	logLevel  string
	settings  map[string]*string
}

// brokerKeys are the settings a config file or a flag may give, with their help.
var brokerKeys = [][2]string{
	{"data", "data directory (required)"},
	{"listen", "address to serve on (default 127.0.0.1:9440)"},
	{"arena.size", "arena size, e.g. 8GiB (default 1GiB)"},
	{"arena.chunk_size", "arena chunk size (default 64KiB)"},
	{"arena.slab_size", "unit of mmap and of giving memory back, a power of two from the chunk size to 1GiB (default 64MiB)"},
	{"arena.low_watermark", "fraction of the arena kept free by reclaim"},
	{"arena.high_watermark", "fraction free at which reclaim stops"},
	{"arena.partition_min", "memory each partition keeps under pressure"},
	{"arena.partition_max", "most memory one partition may hold"},
	{"arena.prefault", "fault the whole arena in at start, in the background, and keep it resident (true/false; default false)"},
	{"log.fsync", "fsync policy: group, batch or never (default group)"},
	{"log.fsync_interval", "group fsync interval (default 5ms)"},
	{"log.segment_bytes", "segment size (default 1GiB)"},
	{"log.retention_bytes", "default retention by size per partition"},
	{"log.retention", "default retention by age, e.g. 168h"},
	{"log.dedup_horizon", "bytes at the end of each partition's log read at load to remember its producers: a resend of a batch further back is stored again (default 64MiB)"},
	{"log.segment_reuse", "segment files each partition keeps from a retention pass, until the next, to start new segments in instead of unlinking them (default 32; -1: none)"},
	{"shards", "number of shards (default: cores)"},
	{"procs", "Go processors the broker runs on (GOMAXPROCS, at most four per CPU; default: twice the cores and one more, unless the GOMAXPROCS environment variable is set or a CPU quota is below the CPUs): one for each event loop and each persister, which wait and write in system calls that keep their processor, and a spare that runs goroutines made runnable meanwhile"},
	{"sched.pin", "pin each shard to a core (true/false; off by default: see BENCHMARKS.md)"},
	{"sched.cores", "comma-separated core list for pinned shards"},
	{"loops", "number of event loops (default: cores)"},
	{"net.max_inbound_total", "memory for requests read and not yet handled, all connections (default 256MiB)"},
	{"net.max_inbound", "of which one connection may hold (default twice the max frame, 130MiB)"},
	{"net.max_outbound_total", "memory held by answers clients have not read, all connections (default 256MiB)"},
	{"net.max_outbound", "one connection's share of it (default an eighth)"},
	{"net.frame_timeout", "close a connection whose partial request frame gets no byte for this long (default 30s)"},
	{"net.send_timeout", "close a connection whose socket takes no byte of its answers for this long, a client that stopped reading, releasing what its answers hold (default 60s, also for 0; never: no limit)"},
	{"broker.max_wait", "longest a fetch's long poll or a produce's wait for durability may last (default 60s)"},
	{"broker.retention_check", "how often each partition applies retention (default 30s)"},
	{"broker.trust_records", "store a produced batch once its header and CRC check out, without decoding its records (true/false; default false: every record is checked and a compressed batch decompressed, so that a batch no consumer could read is refused, not stored)"},
	{"hdfs.addr", "NameNode RPC address(es), comma-separated: ship every partition to HDFS and let the checkpoint wait for it (distributed mode; default off)"},
	{"hdfs.root", "directory of the topics on HDFS (default /sluice)"},
	{"hdfs.user", "HDFS user the broker acts as (default sluice)"},
	{"hdfs.workers", "partitions shipped at once, one HDFS connection each (default 2)"},
	{"hdfs.commit_interval", "how often a partition with data waiting ships a commit round (default 50ms)"},
	{"hdfs.commit_bytes", "most bytes of one partition in one commit round (default 16MiB)"},
	{"hdfs.timeout", "bound of every HDFS call (default 10s)"},
	{"hdfs.roll_bytes", "size at which a partition's HDFS file is sealed and a new one started (default 128MiB)"},
	{"tls.cert", "serve TLS with this PEM certificate chain (with tls.key; reloaded on SIGHUP)"},
	{"tls.key", "the TLS certificate's private key (PEM)"},
	{"tls.client_ca", "require client certificates signed by the CAs in this PEM file"},
	{"auth.users", "require authentication (SCRAM-SHA-256) with the users of this file (sluice user add; mode 0600), and check every request against the ACL file; reloaded on a change or SIGHUP"},
	{"auth.acls", "the ACL file (sluice acl add; default: acls beside auth.users); a missing file grants nothing"},
	{"auth.source", "where the users and ACLs come from: file (auth.users and auth.acls; the default) or zk (the cluster's znodes ROOT/security/users and ROOT/security/acls, followed by every broker; needs zk; sluice user/acl --zk edit them)"},
	{"auth.failure_delay", "how long after a failed authentication its answer is sent (default 1s)"},
	{"auth.reload_interval", "how often the users and ACL files are checked for a change (default 2s)"},
	{"auth.timeout", "how long a connection may stay unauthenticated, from its start or from losing its user, before it is closed (default 30s)"},
	{"zk", "ZooKeeper address(es), comma-separated: join a cluster and serve the partitions its admin assigns (needs hdfs.addr; default off)"},
	{"zk.root", "root of the cluster's znodes (default /sluice)"},
	{"zk.auth", "authenticate to ZooKeeper with the digest credential user:password in this file (mode 0600): needed to read the security znodes once sluice user/acl --zk-auth locked them (default none)"},
	{"zk.session_timeout", "ZooKeeper session timeout: a broker cut off this long loses its partitions (default 6s)"},
	{"broker.id", "this broker's name in the cluster (default its listen address)"},
	{"broker.capacity", "this broker's share weight in placement (default 1)"},
}

func newBrokerFlags() *brokerFlags {
	f := &brokerFlags{fs: flag.NewFlagSet("broker", flag.ContinueOnError), settings: map[string]*string{}}
	for _, k := range brokerKeys {
		f.settings[k[0]] = f.fs.String(k[0], "", k[1])
	}
	f.fs.StringVar(f.settings["arena.size"], "arena-size", "", "same as -arena.size")
	f.fs.StringVar(&f.config, "config", "", "config file of `key = value` lines with the keys above")
	f.fs.StringVar(&f.readyFile, "ready-file", "", "once serving, write the broker's address (and the metrics address) to this file, one per line")
	f.fs.StringVar(&f.metrics, "metrics", "", "serve Prometheus metrics (and pprof with -pprof) on this address, in plaintext without authentication: an address other than loopback needs -metrics.public (or -insecure)")
	f.fs.BoolVar(&f.pprof, "pprof", false, "serve /debug/pprof on the metrics address (other than loopback only with -insecure)")
	f.fs.BoolVar(&f.public, "metrics.public", false, "allow a -metrics address other than loopback (a Prometheus scraping from another host; logged at start); pprof there still needs -insecure")
	f.fs.BoolVar(&f.insecure, "insecure", false, "allow a listen address other than loopback without both TLS (tls.cert) and authentication (auth.users): anyone who reaches it reads the traffic, or reads and writes every topic; also allows metrics and pprof on such an address")
	f.fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	return f
}

// readConfigFile sets every key of the file that no flag set.
func (f *brokerFlags) readConfigFile(set map[string]bool) error {
	raw, err := os.ReadFile(f.config)
	if err != nil {
		return fmt.Errorf("cannot read config file: %w", err)
	}
	// Split, not a bufio.Scanner: a Scanner stops at a line over 64 KiB, and one whose
	// error went unchecked dropped every setting after it, auth and TLS included.
	for n, line := range strings.Split(string(raw), "\n") {
		n++
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		ptr := f.settings[k]
		if !ok || ptr == nil {
			return fmt.Errorf("config file %s line %d: unknown setting %q", f.config, n, k)
		}
		if !set[k] {
			*ptr = v
		}
	}
	return nil
}

// brokerConfig turns the settings into a broker.Config, with clear errors.
func (f *brokerFlags) brokerConfig(logger *slog.Logger) (broker.Config, error) {
	s := func(k string) string { return *f.settings[k] }
	cfg := broker.Config{DataDir: s("data"), Logger: logger, Insecure: f.insecure,
		Metrics: broker.MetricsConfig{Listen: f.metrics, Pprof: f.pprof, Public: f.public}}
	cfg.Net.Listen = cmp(s("listen"), "127.0.0.1:9440")
	var errs []error
	size := func(k string, dst *int64) {
		if v := s(k); v != "" {
			n, err := memarena.ParseSize(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", k, err))
			}
			*dst = n
		}
	}
	frac := func(k string, dst *float64) {
		if v := s(k); v != "" {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", k, err))
			}
			*dst = x
		}
	}
	dur := func(k string, dst *time.Duration) {
		if v := s(k); v != "" {
			d, err := time.ParseDuration(v)
			if err == nil && d < 0 {
				err = fmt.Errorf("%v must not be negative", d)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", k, err))
			}
			*dst = d
		}
	}
	boolean := func(k string, dst *bool) {
		if v := s(k); v != "" {
			on, err := strconv.ParseBool(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", k, err))
			}
			*dst = on
		}
	}
	integer := func(k string, dst *int) {
		if v := s(k); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", k, err))
			}
			*dst = n
		}
	}
	size("arena.size", &cfg.Arena.Size)
	size("arena.chunk_size", &cfg.Arena.ChunkSize)
	size("arena.slab_size", &cfg.Arena.SlabSize)
	frac("arena.low_watermark", &cfg.Arena.LowWatermark)
	frac("arena.high_watermark", &cfg.Arena.HighWatermark)
	size("arena.partition_min", &cfg.Arena.PartitionMin)
	size("arena.partition_max", &cfg.Arena.PartitionMax)
	boolean("arena.prefault", &cfg.Arena.Prefault)
	if v := s("log.fsync"); v != "" {
		m, err := local.ParseSyncMode(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("log.fsync: %w", err))
		}
		cfg.Log.Sync = m
	}
	dur("log.fsync_interval", &cfg.Log.SyncInterval)
	size("log.segment_bytes", &cfg.Log.SegmentBytes)
	size("log.retention_bytes", &cfg.Log.RetentionBytes)
	dur("log.retention", &cfg.Log.RetentionAge)
	integer("log.segment_reuse", &cfg.Log.ReuseSegments)
	size("log.dedup_horizon", &cfg.DedupHorizon)
	integer("shards", &cfg.Sched.Shards)
	boolean("sched.pin", &cfg.Sched.Pin)
	if v := s("sched.cores"); v != "" {
		for _, c := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(c))
			if err != nil {
				errs = append(errs, fmt.Errorf("sched.cores: %w", err))
			}
			cfg.Sched.Cores = append(cfg.Sched.Cores, n)
		}
	}
	integer("loops", &cfg.Net.Loops)
	size("net.max_inbound_total", &cfg.Net.MaxInboundTotal)
	var maxInbound int64
	size("net.max_inbound", &maxInbound)
	cfg.Net.MaxInbound = int(maxInbound)
	size("net.max_outbound_total", &cfg.Net.MaxOutboundTotal)
	size("net.max_outbound", &cfg.Net.MaxOutbound)
	dur("net.frame_timeout", &cfg.Net.FrameTimeout)
	if s("net.send_timeout") == "never" {
		cfg.Net.SendTimeout = -1 // netio: no deadline
	} else {
		dur("net.send_timeout", &cfg.Net.SendTimeout)
	}
	dur("broker.max_wait", &cfg.MaxWait)
	dur("broker.retention_check", &cfg.RetentionCheck)
	boolean("broker.trust_records", &cfg.TrustRecords)
	if v := s("hdfs.addr"); v != "" {
		for _, a := range strings.Split(v, ",") {
			cfg.HDFS.Addresses = append(cfg.HDFS.Addresses, strings.TrimSpace(a))
		}
	}
	cfg.HDFS.Root = cmp(s("hdfs.root"), "/sluice")
	cfg.HDFS.Conn.User = cmp(s("hdfs.user"), "sluice")
	integer("hdfs.workers", &cfg.HDFS.Workers)
	dur("hdfs.commit_interval", &cfg.HDFS.CommitInterval)
	var commitBytes int64
	size("hdfs.commit_bytes", &commitBytes)
	cfg.HDFS.CommitBytes = int(commitBytes)
	dur("hdfs.timeout", &cfg.HDFS.Conn.Timeout)
	size("hdfs.roll_bytes", &cfg.HDFS.Writer.RollBytes)
	cfg.TLS = broker.TLSConfig{CertFile: s("tls.cert"), KeyFile: s("tls.key"), ClientCAFile: s("tls.client_ca")}
	cfg.Auth = broker.AuthConfig{UsersFile: s("auth.users"), ACLFile: s("auth.acls")}
	switch s("auth.source") {
	case "", "file":
	case "zk":
		cfg.Auth.FromZooKeeper = true
	default:
		errs = append(errs, fmt.Errorf("auth.source %q: want file or zk", s("auth.source")))
	}
	dur("auth.failure_delay", &cfg.Auth.FailureDelay)
	dur("auth.reload_interval", &cfg.Auth.ReloadInterval)
	dur("auth.timeout", &cfg.Auth.Timeout)
	if v := s("zk"); v != "" {
		for _, a := range strings.Split(v, ",") {
			cfg.Cluster.ZK = append(cfg.Cluster.ZK, strings.TrimSpace(a))
		}
	}
	cfg.Cluster.Root = cmp(s("zk.root"), "/sluice")
	if v := s("zk.auth"); v != "" {
		d, err := readDigest(v)
		errs = append(errs, err)
		cfg.Cluster.Digest = d
	}
	dur("zk.session_timeout", &cfg.Cluster.SessionTimeout)
	cfg.Cluster.ID = s("broker.id")
	if v := s("broker.capacity"); v != "" {
		c, err := strconv.ParseFloat(v, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("-broker.capacity: %w", err))
		}
		cfg.Cluster.Capacity = c
	}
	if cfg.DataDir == "" {
		errs = append(errs, errors.New("-data is required"))
	}
	return cfg, errors.Join(errs...)
}

func cmp(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func runBroker(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	// SIGHUP is systemctl reload. One that comes while the broker starts (reading its
	// config, recovering partitions) must not end it, as Go's default would (and systemd
	// counts an exit by SIGHUP as clean: no restart); it is kept and handled once serving.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGHUP)
	defer signal.Stop(sig)
	f := newBrokerFlags()
	if err := parseFlags(f.fs, args); err != nil {
		return err
	}
	if f.fs.NArg() > 0 {
		return usageError{"unexpected argument " + strings.Join(f.fs.Args(), " ")}
	}
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if f.config != "" {
		if err := f.readConfigFile(set); err != nil {
			return usageError{err.Error()}
		}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return usageError{"-log-level: " + err.Error()}
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg, err := f.brokerConfig(logger)
	if err != nil {
		return usageError{err.Error()}
	}
	cores := runtime.GOMAXPROCS(0)
	procs, err := brokerProcs(*f.settings["procs"], os.Getenv("GOMAXPROCS") != "", cores, runtime.NumCPU())
	if err != nil {
		return usageError{err.Error()}
	}
	if cfg.Sched.Shards == 0 {
		cfg.Sched.Shards = cores // one per core, whatever the processors (procs.go)
	}
	if procs != cores {
		runtime.GOMAXPROCS(procs) // which ends the runtime's following of a CPU quota: there is none
	}
	logger.Info("go processors", "procs", procs, "cores", cores)
	b, err := broker.Start(cfg)
	if err != nil {
		return err
	}
	ready := b.Addr() + "\n"
	if addr := b.MetricsAddr(); addr != "" {
		ready += addr + "\n"
	}
	fmt.Fprintf(stdout, "sluice broker serving on %s (data %s)\n", b.Addr(), cfg.DataDir)
	if f.readyFile != "" {
		// Written whole through a rename, so a reader never sees half of it.
		if err := writeReady(f.readyFile, ready); err != nil {
			b.Shutdown(context.Background())
			return fmt.Errorf("cannot write ready file: %w", err)
		}
	}
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	got := <-sig
	for got == syscall.SIGHUP { // reload the TLS certificates, users and ACLs; keep serving
		if err := b.ReloadTLS(); err != nil {
			logger.Error("TLS reload refused: the serving certificate stays", "err", err)
		}
		b.ReloadAuth() // logs its result
		got = <-sig
	}
	logger.Info("shutting down: making everything accepted durable", "signal", got.String())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	logger.Info("stopped")
	return nil
}

func writeReady(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
