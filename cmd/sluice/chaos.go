package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"sluice/chaos"
	"sluice/codec"
)

// chaosCmd runs a chaos run (package chaos) with this binary as the brokers, prints its
// table (and writes its JSON with --json), and fails unless the run is OK.
func chaosCmd(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	var cfg chaos.Config
	var faults, codecs, jsonPath string
	var keep, quiet bool
	fs.DurationVar(&cfg.Duration, "duration", time.Minute, "how long faults are injected under load (healing and the read-back come after)")
	fs.DurationVar(&cfg.Interval, "interval", 2*time.Second, "mean time under load between two faults")
	fs.StringVar(&faults, "faults", "", "comma-separated faults (default: all the mode supports; embedded: "+
		strings.Join(chaos.EmbeddedFaults, ",")+"; distributed: "+strings.Join(chaos.DistributedFaults, ",")+")")
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of the fault schedule (default: from the clock, printed)")
	fs.IntVar(&cfg.Partitions, "partitions", 4, "partitions of the topic")
	fs.IntVar(&cfg.Writers, "writers", 4, "producers (they cycle through async/sync, acks accepted/persisted, keyed/keyless)")
	fs.IntVar(&cfg.Rate, "rate", 500, "records per second of each asynchronous producer")
	fs.IntVar(&cfg.ValueSize, "value-size", 100, "bytes per record value (at least 24)")
	fs.BoolVar(&cfg.Distributed, "distributed", false, "run ZooKeeper, HDFS, two admins and several brokers")
	fs.StringVar(&codecs, "compression", "", "comma-separated codecs the producers compress with, each new producer taking the next (default: none,zstd,s2,lz4)")
	fs.DurationVar(&cfg.ProducerLife, "producer-life", 15*time.Second, "how long each producer writes before it is closed and the next one, with the next codec, starts (negative: until a call fails)")
	fs.StringVar(&cfg.Fsync, "fsync", "", "the brokers' fsync policy: group, batch or never (default: the broker's, group)")
	fs.DurationVar(&cfg.Session, "session", 2*time.Second, "with --distributed: the ZooKeeper session timeout of brokers and admins")
	fs.IntVar(&cfg.DataNodes, "datanodes", 3, "with --distributed: HDFS DataNodes, each in its own JVM, every block on all of them (1 to 3; with 1 a DataNode fault is an outage of the only copy)")
	fs.DurationVar(&cfg.HDFSOutage, "hdfs-outage", 5*time.Second, "with --distributed: how long hdfs-restart, nn-kill and dn-kill keep HDFS (or the one process) down, and hdfs-pause, nn-pause and dn-pause keep it stopped")
	fs.StringVar(&cfg.Dir, "dir", "", "directory for the run's data and process logs (default: a new temporary one)")
	fs.BoolVar(&keep, "keep", false, "keep the run directory even when the run is OK")
	fs.StringVar(&jsonPath, "json", "", "also write the result as JSON to this file")
	fs.BoolVar(&quiet, "quiet", false, "print only the result, not each fault as it happens")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{"chaos takes no arguments"}
	}
	if faults != "" {
		cfg.Faults = strings.Split(faults, ",")
	}
	if codecs != "" {
		for _, name := range strings.Split(codecs, ",") {
			c, err := codec.ParseCodec(name)
			if err != nil {
				return usageError{err.Error()}
			}
			cfg.Codecs = append(cfg.Codecs, c)
		}
	}
	if !isSet(fs, "seed") {
		cfg.Seed = time.Now().UnixNano()
	}
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot find the sluice binary: %w", err)
	}
	cfg.Binary = bin
	if cfg.Dir == "" {
		if cfg.Dir, err = os.MkdirTemp("", "sluice-chaos-"); err != nil {
			return fmt.Errorf("cannot create a run directory: %w", err)
		}
	}
	if !quiet {
		cfg.Log = stderr
	}
	ctx, stop := commandContext(0) // SIGINT and SIGTERM end the run; Run stops its processes
	defer stop()
	res, err := chaos.Run(ctx, cfg)
	if err != nil {
		return usageError{err.Error()}
	}
	if err := res.WriteTable(stdout); err != nil {
		return err
	}
	if jsonPath != "" {
		f, err := os.Create(jsonPath)
		if err != nil {
			return fmt.Errorf("cannot write %s: %w", jsonPath, err)
		}
		defer f.Close()
		if err := res.WriteJSON(f); err != nil {
			return err
		}
	}
	if !res.OK() {
		return fmt.Errorf("chaos run failed (seed %d); its data and process logs are in %s", cfg.Seed, cfg.Dir)
	}
	if !keep {
		os.RemoveAll(cfg.Dir)
	}
	return nil
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
