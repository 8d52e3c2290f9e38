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
	"strings"
	"syscall"
	"time"

	"sluice/admin"
)

// runAdmin runs an admin of a distributed cluster: it stands by until ZooKeeper elects
// it, then places partitions on the live brokers until it is stopped (SIGTERM, SIGINT)
// or loses its session.
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
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usageError{"-log-level: " + err.Error()}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := zkf.dial(ctx, *session*3, *session, log)
	if err != nil {
		return err
	}
	defer c.Close()
	log.Info("admin standing by", "id", *id)
	if err := c.Campaign(ctx, *id); err != nil {
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	log.Info("admin leading", "id", *id)
	err = c.Lead(ctx, admin.Limits{MaxMoves: *maxMoves, Slack: *slack}, *interval)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// zkFlags are the flags of the commands that talk to a cluster's ZooKeeper.
type zkFlags struct{ addrs, root *string }

func newZKFlags(fs *flag.FlagSet) zkFlags {
	return zkFlags{addrs: fs.String("zk", "", "ZooKeeper addresses, comma-separated (required)"),
		root: fs.String("zk-root", "/sluice", "root of the cluster's znodes")}
}

// dial connects with the given session timeout, waiting at most wait for the session.
func (z zkFlags) dial(ctx context.Context, wait, session time.Duration, log *slog.Logger) (*admin.Cluster, error) {
	if *z.addrs == "" {
		return nil, usageError{"-zk is required"}
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return admin.Dial(ctx, strings.Split(*z.addrs, ","), *z.root, session, log)
}
