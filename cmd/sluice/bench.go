package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"syscall"
	"time"

	"sluice/bench"
)

// benchCmd returns the run function of `sluice bench WORKLOAD`.
func benchCmd(workload string) func(args []string, _ io.Reader, stdout, stderr io.Writer) error {
	return func(args []string, _ io.Reader, stdout, stderr io.Writer) error {
		var c bench.Config
		fs := flag.NewFlagSet("bench "+workload, flag.ContinueOnError)
		fs.StringVar(&c.System, "system", "sluice", "system to drive: "+strings.Join(bench.Systems(), ", "))
		fs.StringVar(&c.Broker, "broker", "127.0.0.1:9440", "server address (for sendfile: a directory for its file)")
		fs.StringVar(&c.MetricsAddr, "metrics", "", "e2e: the sluice broker's metrics address (host:port), to read its stages into the breakdown")
		fs.IntVar(&c.ServerPid, "server-pid", 0, "e2e: the server's process id (on this host), to report its processor time with the harness's")
		fs.StringVar(&c.Topic, "topic", "bench", "topic (Kafka topic, NATS stream)")
		fs.IntVar(&c.RecordSize, "record-size", 1024, "record value size in bytes")
		fs.IntVar(&c.BatchBytes, "batch-size", 1<<20, "producer batch size in bytes")
		fs.Int64Var(&c.BufferBytes, "buffer-bytes", 0, "sluice producer: bytes held until durable, at most (0: 2 GiB)")
		fs.IntVar(&c.FetchBytes, "fetch-bytes", 0, "sluice consumer: byte budget of one fetch answer (0: the client's default, 1 MiB)")
		fs.DurationVar(&c.Linger, "linger", 5*time.Millisecond, "producer linger (0: none, the sluice client's LowLatency mode)")
		fs.IntVar(&c.Partitions, "partitions", 1, "partitions of the topic, if the harness creates it")
		fs.IntVar(&c.Producers, "producers", 1, "number of producers")
		fs.IntVar(&c.Consumers, "consumers", 1, "number of consumers")
		fs.Float64Var(&c.Rate, "rate", 0, "target rate in records/s over all producers (0: as fast as possible)")
		fs.DurationVar(&c.Duration, "duration", 0, "run time (default 10s unless -count is set)")
		fs.Int64Var(&c.Count, "count", 0, "records to produce or consume (0: until -duration)")
		fs.Int64Var(&c.MinBytes, "min-bytes", 0, "produce: a sustained run, until -duration and this many value bytes, whichever is later (needs -max-duration)")
		fs.DurationVar(&c.MaxDuration, "max-duration", 0, "produce: bound of a sustained run (-min-bytes)")
		fs.Int64Var(&c.RetentionBytes, "retention-bytes", 0, "bytes kept per partition of a topic the harness creates (0: the system's default)")
		fs.Int64Var(&c.SegmentBytes, "segment-bytes", 0, "segment size of a topic the harness creates (sluice, Kafka; 0: default)")
		fs.StringVar(&c.Compression, "compression", "none", "none, lz4 or zstd")
		from := fs.String("from", "start", "consume from the start (oldest records) or the tail (newest)")
		fs.DurationVar(&c.Warmup, "warmup", 0, "e2e: time whose latencies are not counted")
		jsonOut := fs.String("json", "", "write the result as JSON to this file")
		quiet := fs.Bool("quiet", false, "no live progress line")
		cpuProfile := fs.String("cpuprofile", "", "write the harness's CPU profile (producers and consumers, go tool pprof) to this file")
		traceOut := fs.String("trace", "", "write the harness's execution trace (go tool trace) to this file")
		sec := newSecurityFlags(fs)
		if err := noPositional(fs, args); err != nil {
			return err
		}
		opts, err := sec.opts()
		if err != nil {
			return err
		}
		if len(opts) > 0 && c.System != "sluice" {
			return usageError{"--tls-* and --user are for -system sluice"}
		}
		c.SluiceOpts = opts
		switch *from {
		case "start":
			c.FromStart = true
		case "tail":
		default:
			return usageError{fmt.Sprintf("-from %q: start or tail", *from)}
		}
		w := workload
		if workload == "consume" && !c.FromStart {
			w = "e2e" // reading the tail needs producers: it is an end-to-end run
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		var progress io.Writer = stderr
		if *quiet {
			progress = nil
		}
		if *cpuProfile != "" {
			f, err := os.Create(*cpuProfile)
			if err != nil {
				return fmt.Errorf("cannot write the CPU profile: %w", err)
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return fmt.Errorf("cannot write the CPU profile: %w", err)
			}
			defer pprof.StopCPUProfile()
		}
		if *traceOut != "" {
			stopTrace, err := startTrace(*traceOut)
			if err != nil {
				return err
			}
			defer stopTrace()
		}
		res, err := bench.Run(ctx, w, c, progress)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, bench.Summary(res))
		if *jsonOut != "" {
			if err := res.WriteJSON(*jsonOut); err != nil {
				return err
			}
		}
		if res.Errors > 0 {
			return fmt.Errorf("%d errors, the first: %s", res.Errors, res.FirstError)
		}
		return nil
	}
}

// startTrace writes the process's execution trace to path until the returned function
// runs: it shows where the harness's goroutines wait (scheduler, syscalls, network),
// which a CPU profile does not.
func startTrace(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cannot write the execution trace: %w", err)
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot write the execution trace: %w", err)
	}
	return func() {
		trace.Stop()
		f.Close()
	}, nil
}

// benchRelay runs the relay of the end-to-end latency ceiling (bench/relay.go) until
// SIGINT or SIGTERM.
func benchRelay(args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("bench relay", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9600", "address to serve the relay on")
	if err := noPositional(fs, args); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("cannot serve the relay: %w", err)
	}
	fmt.Fprintf(stdout, "relay on %s\n", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return bench.ServeRelay(ctx, ln)
}
