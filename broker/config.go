package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"sluice/admin"
	"sluice/engine"
	"sluice/memarena"
	"sluice/netio"
	"sluice/persist/local"
	"sluice/sched"
)

// Config configures a broker. Flags and config files are read by cmd/sluice; this
// package gets plain values.
type Config struct {
	DataDir string
	Net     netio.Config
	Arena   memarena.Config
	Sched   sched.Config
	// Log holds the defaults of every partition's segment log (topics may override
	// segment size and retention). FS, Clock and Logger are set by the broker.
	Log local.Options
	// RetentionCheck is how often each shard applies retention. Default 30 s.
	RetentionCheck time.Duration
	// BusyRetryAfter is what a throttled producer is told to wait. Default 5 ms.
	BusyRetryAfter time.Duration
	// MaxWait caps how long a request may wait on a partition: a fetch's long poll and a
	// produce's wait for durability. A client asking for more is answered at the cap.
	// Default 60 s.
	MaxWait time.Duration
	// DedupHorizon is how many bytes at the end of each partition's log (local, or its
	// HDFS tail on a new host) are read when it loads, to rebuild what it remembers of
	// its producers: a resend after a restart or a move of a batch further back than
	// this is not recognized and is stored again (RELIABILITY.md). Reading it costs a
	// header per batch at load. Default 64 MiB.
	DedupHorizon int64
	// TrustRecords stores produced batches once their header and CRC check out, without
	// decoding their records (engine.RecordChecker): for a broker whose producers are all
	// known to seal well-formed batches. By default every record is checked, and a
	// compressed batch decompressed, so that a batch no consumer could read is refused
	// (corrupt_batch) rather than stored.
	TrustRecords bool
	// HDFS ships every partition to HDFS when its Addresses are set (distributed mode).
	HDFS HDFSConfig
	// Cluster follows a ZooKeeper cluster's assignments when its ZK addresses are set
	// (distributed mode; needs HDFS).
	Cluster ClusterConfig
	// TLS serves the listener over TLS when its CertFile is set.
	TLS TLSConfig
	// Auth requires authentication and checks ACLs when its UsersFile (or FromZooKeeper)
	// is set.
	Auth AuthConfig
	// Metrics serves /metrics (and pprof) when its Listen is set.
	Metrics MetricsConfig
	// Insecure allows listening on an address other than loopback without both TLS and
	// authentication: without them anyone who can reach it reads the traffic, or reads
	// and writes every topic. It also allows metrics and pprof on such an address.
	Insecure bool
	Logger   *slog.Logger
}

// EnsureDefaults fills unset fields.
func (c *Config) EnsureDefaults() *Config {
	c.Net.EnsureDefaults()
	c.Arena.EnsureDefaults()
	c.Sched.EnsureDefaults()
	c.Log.EnsureDefaults()
	if c.RetentionCheck == 0 {
		c.RetentionCheck = 30 * time.Second
	}
	if c.BusyRetryAfter == 0 {
		c.BusyRetryAfter = 5 * time.Millisecond
	}
	if c.DedupHorizon == 0 {
		c.DedupHorizon = engine.DefaultDedupHorizon
	}
	if c.MaxWait == 0 {
		c.MaxWait = time.Minute
	}
	if c.HDFS.Root == "" {
		c.HDFS.Root = "/sluice"
	}
	if c.HDFS.Conn.User == "" {
		c.HDFS.Conn.User = "sluice"
	}
	if c.Cluster.Root == "" {
		c.Cluster.Root = "/sluice"
	}
	if c.Cluster.SessionTimeout == 0 {
		c.Cluster.SessionTimeout = 6 * time.Second
	}
	if c.Cluster.Capacity == 0 {
		c.Cluster.Capacity = 1
	}
	c.Auth.ensureDefaults()
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Net.Logger = c.Logger
	c.Log.Logger = c.Logger
	return c
}

// Validate checks every part.
func (c *Config) Validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("data directory not set"))
	}
	if c.MaxWait < time.Millisecond || c.RetentionCheck <= 0 || c.BusyRetryAfter <= 0 {
		errs = append(errs, fmt.Errorf("max wait %v (at least 1ms), retention check %v and busy retry %v must be positive",
			c.MaxWait, c.RetentionCheck, c.BusyRetryAfter))
	}
	if c.DedupHorizon < 0 {
		errs = append(errs, fmt.Errorf("log.dedup_horizon %d must be positive", c.DedupHorizon))
	}
	if c.HDFS.Enabled() && !strings.HasPrefix(c.HDFS.Root, "/") {
		errs = append(errs, fmt.Errorf("hdfs.root %q must be an absolute path", c.HDFS.Root))
	}
	if missing := c.missingSecurity(); missing != "" && !c.Insecure && !loopback(c.Net.Listen) {
		errs = append(errs, fmt.Errorf("listen %s is not a loopback address and %s is off: anyone who reaches it %s; turn it on (docs/security.md) or give -insecure to serve it anyway",
			c.Net.Listen, missing, exposure(missing)))
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") || (c.TLS.ClientCAFile != "" && c.TLS.CertFile == "") {
		errs = append(errs, errors.New("tls.cert and tls.key go together, and tls.client_ca needs them"))
	}
	if c.Cluster.Enabled() && !c.HDFS.Enabled() {
		errs = append(errs, errors.New("zk needs hdfs.addr: partitions move between brokers through HDFS"))
	}
	if c.Cluster.Enabled() && (c.Cluster.SessionTimeout < 100*time.Millisecond || c.Cluster.Capacity <= 0 || strings.Contains(c.Cluster.ID, "/")) {
		errs = append(errs, fmt.Errorf("zk.session_timeout %v (at least 100ms), capacity %v (positive) and broker.id %q (no '/')",
			c.Cluster.SessionTimeout, c.Cluster.Capacity, c.Cluster.ID))
	}
	if c.Cluster.Digest != (admin.Digest{}) && !c.Cluster.Enabled() {
		errs = append(errs, errors.New("zk.auth needs zk"))
	}
	if c.Auth.FromZooKeeper && !c.Cluster.Enabled() {
		errs = append(errs, errors.New("auth.source zk needs zk: the users and ACLs are the cluster's"))
	}
	errs = append(errs, c.Metrics.Validate(c.Insecure), c.Auth.validate(), c.Net.Validate(), c.Arena.Validate(), c.Sched.Validate(), c.Log.Validate())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid broker config: %w", err)
	}
	return nil
}

// String renders the configuration for the startup log.
func (c *Config) String() string {
	s := fmt.Sprintf("data=%s listen=%s net={%s} arena={%v} shards={%v} log={%v} max_wait=%v",
		c.DataDir, c.Net.Listen, c.Net.String(), c.Arena, c.Sched, c.Log.String(), c.MaxWait)
	if c.HDFS.Enabled() {
		h := &c.HDFS
		s += fmt.Sprintf(" hdfs={addr=%v root=%s user=%s workers=%d commit_interval=%v commit_bytes=%d timeout=%v roll_bytes=%d}",
			h.Addresses, h.Root, h.Conn.User, h.Workers, h.CommitInterval, h.CommitBytes, h.Conn.Timeout, h.Writer.RollBytes)
	}
	if c.Auth.Enabled() {
		s += " auth={" + c.Auth.String() + "}"
	}
	if c.Cluster.Enabled() {
		s += fmt.Sprintf(" cluster={zk=%v root=%s id=%q session_timeout=%v capacity=%v zk_auth_user=%q}",
			c.Cluster.ZK, c.Cluster.Root, c.Cluster.ID, c.Cluster.SessionTimeout, c.Cluster.Capacity, c.Cluster.Digest.User)
	}
	return s
}

// loopback reports whether a listen address only accepts connections from this host:
// a loopback IP or "localhost". An empty host (every interface) is not.
func loopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// missingSecurity names what a non-loopback listener lacks: "", "TLS",
// "authentication" or "TLS and authentication".
func (c *Config) missingSecurity() string {
	switch tls, authn := c.TLS.Enabled(), c.Auth.Enabled(); {
	case tls && authn:
		return ""
	case authn:
		return "TLS"
	case tls:
		return "authentication"
	}
	return "TLS and authentication"
}

// exposure says what a listener lacking missing gives away.
func exposure(missing string) string {
	if missing == "TLS" {
		return "on the path reads every record and can take over connections"
	}
	return "reads and writes every topic"
}
