package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"sluice/admin"
	"sluice/broker"
)

// runAdmin runs an admin of a distributed cluster: it stands by until ZooKeeper elects
// it, then places partitions on the live brokers until it is stopped (SIGTERM, SIGINT);
// a lost session or ZooKeeper error starts it over (adminRound).
func runAdmin(args []string, _ io.Reader, _, stderr io.Writer) error {
	fs := flag.NewFlagSet("admin", flag.ContinueOnError)
	zkf := newZKFlags(fs)
	session := fs.Duration("zk-session-timeout", 6*time.Second, "ZooKeeper session timeout")
	host, _ := os.Hostname()
	id := fs.String("id", fmt.Sprintf("%s-%d", host, os.Getpid()), "this admin's name in the election")
	maxMoves := fs.Int("max-moves", 4, "partitions a rebalance moves per pass")
	slack := fs.Float64("slack", 0.2, "how far above its fair share of load (0.2: 20 %) a broker may be before partitions move off it")
	interval := fs.Duration("interval", time.Second, "time between placement passes when nothing changes")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	metrics := fs.String("metrics", "", "serve Prometheus metrics on this address (leadership, passes, moves); loopback unless -metrics.public")
	public := fs.Bool("metrics.public", false, "allow a -metrics address other than loopback (plaintext, no authentication: firewall it to the scrapers)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	mc := broker.MetricsConfig{Listen: *metrics, Public: *public}
	if err := mc.Validate(false); err != nil {
		return usageError{err.Error()}
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usageError{"-log-level: " + err.Error()}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *zkf.addrs == "" {
		return usageError{"-zk is required"}
	}
	var cur atomic.Pointer[admin.Cluster] // the session of the round under way, for metrics
	if *metrics != "" {
		addr, err := broker.ServeFigures(*metrics, log, func() []broker.Figure {
			var st admin.LeaderStats
			if c := cur.Load(); c != nil {
				st = c.Stats()
			}
			return adminFigures(st)
		})
		if err != nil {
			return err
		}
		log.Info("serving metrics", "addr", addr)
		if w := mc.Warning(); w != "" {
			log.Warn(w)
		}
	}
	lim := admin.Limits{MaxMoves: *maxMoves, Slack: *slack}
	// An admin outlives ZooKeeper's troubles: a lost session, a server restarted, a
	// connection refused all end a round (it stops leading, if it led), and the next
	// round stands by again on a new session. Only SIGTERM or SIGINT ends it.
	for {
		err := adminRound(ctx, zkf, *session, *id, lim, *interval, log, &cur)
		if ctx.Err() != nil {
			return nil
		}
		log.Error("admin lost ZooKeeper: standing by again on a new session", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// adminRound is one session of an admin: connect, stand by, lead until it ends.
func adminRound(ctx context.Context, zkf zkFlags, session time.Duration, id string, lim admin.Limits,
	interval time.Duration, log *slog.Logger, cur *atomic.Pointer[admin.Cluster]) error {
	c, err := zkf.dial(ctx, session*3, session, log)
	if err != nil {
		return err
	}
	defer c.Close()
	cur.Store(c)
	log.Info("admin standing by", "id", id)
	if err := c.Campaign(ctx, id); err != nil {
		return err
	}
	log.Info("admin leading", "id", id)
	return c.Lead(ctx, lim, interval)
}

// zkFlags are the flags of the commands that talk to a cluster's ZooKeeper.
type zkFlags struct{ addrs, root, auth *string }

func newZKFlags(fs *flag.FlagSet) zkFlags {
	return zkFlags{addrs: fs.String("zk", "", "ZooKeeper addresses, comma-separated (required)"),
		root: fs.String("zk-root", "/sluice", "root of the cluster's znodes"),
		auth: zkAuthFlag(fs)}
}

// zkAuthFlag defines --zk-auth, the ZooKeeper digest credential's file.
func zkAuthFlag(fs *flag.FlagSet) *string {
	return fs.String("zk-auth", "", "authenticate to ZooKeeper with the digest credential user:password in this file (mode 0600): the cluster's zk.auth; sluice user/acl edits then lock the security znodes to it")
}

// dial connects with the given session timeout, waiting at most wait for the session.
func (z zkFlags) dial(ctx context.Context, wait, session time.Duration, log *slog.Logger) (*admin.Cluster, error) {
	if *z.addrs == "" {
		return nil, usageError{"-zk is required"}
	}
	var opts []admin.DialOption
	if *z.auth != "" {
		d, err := readDigest(*z.auth)
		if err != nil {
			return nil, usageError{"--zk-auth: " + err.Error()}
		}
		opts = append(opts, admin.WithDigest(d))
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return admin.Dial(ctx, strings.Split(*z.addrs, ","), *z.root, session, log, opts...)
}

// adminFigures are an admin's metrics.
func adminFigures(s admin.LeaderStats) []broker.Figure {
	leading := 0.0
	if s.Leading {
		leading = 1
	}
	return []broker.Figure{
		{Name: "sluice_admin_leading", Help: "1 while this admin leads (places partitions), 0 while it stands by.", Value: leading},
		{Name: "sluice_admin_passes_total", Help: "Placement passes this admin ran while leading.", Value: float64(s.Passes), Counter: true},
		{Name: "sluice_admin_moves_total", Help: "Assignments this admin wrote: partitions placed or moved.", Value: float64(s.Moves), Counter: true},
		{Name: "sluice_admin_repaired_total", Help: "Unreadable assignments written again as they last were.", Value: float64(s.Repaired), Counter: true},
		{Name: "sluice_admin_brokers", Help: "Live brokers at the last pass.", Value: float64(s.Brokers)},
		{Name: "sluice_admin_partitions", Help: "Partitions at the last pass.", Value: float64(s.Partitions)},
		{Name: "sluice_admin_unreadable_registrations", Help: "Live brokers whose registration znode holds junk (edited by hand; the admin log names it), at the last pass.", Value: float64(s.UnreadableBrokers)},
		{Name: "sluice_admin_unreadable_topics", Help: "Topics whose znode holds junk (edited by hand; the admin log names it), at the last pass: placed as last read, or left as they are.", Value: float64(s.UnreadableTopics)},
		{Name: "sluice_admin_unplaced_partitions", Help: "Partitions with no live broker to place them on at the last pass (alert when above 0).", Value: float64(s.Unplaced)},
	}
}
