// Command benchhdfs runs the HDFS tier's benchmarks behind `make bench-hdfs`: it starts a
// MiniDFSCluster and sluice brokers on 127.0.0.1, measures the raw colinmarc/hdfs rates,
// sustained produce without and with HDFS shipping, the HDFS lag at half load, the
// catch-up after an outage and cold reads, stops every process it started (by pid; the
// kernel kills them too if benchhdfs dies), and writes the generated HDFS section of
// BENCHMARKS.md and the results as JSON. scripts/bench-hdfs installs HDFS and calls it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"sluice/bench"
)

func main() {
	var o bench.HDFSOptions
	flag.BoolVar(&o.Quick, "quick", false, "short runs and a 15 s outage")
	flag.DurationVar(&o.Outage, "outage", 0, "how long HDFS stays down in the outage run (default 60s, 15s with -quick)")
	flag.StringVar(&o.Work, "work", filepath.Join(os.TempDir(), "sluice-bench-hdfs"), "scratch directory")
	flag.StringVar(&o.SluiceBin, "sluice", "bin/sluice", "sluice binary")
	out := flag.String("out", "BENCHMARKS.md", "markdown file whose generated HDFS section is rewritten")
	jsonOut := flag.String("json", "", "write every result to this JSON file")
	flag.Parse()
	o.Log = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, *out, *jsonOut); err != nil {
		fmt.Fprintln(os.Stderr, "benchhdfs:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o bench.HDFSOptions, out, jsonOut string) error {
	b, err := bench.RunHDFS(ctx, o)
	if jsonOut != "" && b != nil {
		j, jerr := json.MarshalIndent(b, "", "  ")
		if jerr != nil {
			return fmt.Errorf("cannot encode the results: %w", jerr)
		}
		if jerr := os.WriteFile(jsonOut, j, 0o644); jerr != nil {
			return fmt.Errorf("cannot write the results: %w", jerr)
		}
	}
	if err != nil {
		return err
	}
	doc, err := os.ReadFile(out)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("cannot read %s: %w", out, err)
	}
	return os.WriteFile(out, []byte(bench.RewriteHDFSSection(string(doc), b.Markdown())), 0o644)
}
