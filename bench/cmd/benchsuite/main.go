// Command benchsuite runs the suite behind `make bench` and `make bench-quick`: it starts
// sluice, NATS JetStream and Kafka (those it is given) one at a time on 127.0.0.1, runs
// the same workloads against each and the ceilings, stops every process it started (by
// pid; the kernel kills them too if benchsuite dies), and writes the generated section of
// BENCHMARKS.md, the charts and the results as JSON. scripts/bench-all installs the
// peers and calls it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"sluice/bench"
)

func main() {
	var o bench.SuiteOptions
	flag.BoolVar(&o.Quick, "quick", false, "small counts and short runs")
	flag.BoolVar(&o.NewOnly, "new-only", false, "only the disk ceilings and the sustained runs (with the copy count)")
	flag.StringVar(&o.Work, "work", filepath.Join(os.TempDir(), "sluice-bench"), "scratch directory")
	flag.StringVar(&o.SluiceBin, "sluice", "bin/sluice", "sluice binary")
	flag.StringVar(&o.NATSBin, "nats-server", "", "nats-server binary (empty: skip NATS)")
	flag.StringVar(&o.KafkaDir, "kafka", "", "Kafka directory with lib/ and log4j2.properties (empty: skip Kafka)")
	only := flag.String("only", "", "comma-separated parts to run: latency, consume, produce (default: everything)")
	systems := flag.String("systems", "", "comma-separated servers to start: sluice, nats, kafka (default: every one given)")
	out := flag.String("out", "BENCHMARKS.md", "markdown file whose generated section is rewritten")
	charts := flag.String("charts", "docs/bench", "directory for the PNG charts")
	jsonOut := flag.String("json", "", "write every result to this JSON file")
	fromJSON := flag.String("from-json", "", "run nothing: redraw the charts and the section from this results file")
	flag.Parse()
	o.Only, o.Systems = splitList(*only), splitList(*systems)
	o.Log = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, *out, *charts, *jsonOut, *fromJSON); err != nil {
		fmt.Fprintln(os.Stderr, "benchsuite:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o bench.SuiteOptions, out, chartDir, jsonOut, fromJSON string) error {
	var s *bench.Suite
	var err error
	if fromJSON != "" {
		s, err = load(fromJSON)
		o.Only, o.Systems = s.Only, s.Systems
	} else {
		s, err = bench.RunSuite(ctx, o)
	}
	if err != nil {
		return err
	}
	if jsonOut != "" {
		b, _ := json.MarshalIndent(s, "", "  ")
		if err := os.WriteFile(jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(chartDir, 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(out), chartDir)
	if err != nil {
		return err
	}
	// A narrow run has charts and a section of its own: it never overwrites the full run's.
	narrow := len(o.Only) > 0 || len(o.Systems) > 0
	prefix, rewrite := "", bench.RewriteSection
	if narrow {
		prefix, rewrite = "narrow-", bench.RewriteNarrowSection
	}
	var charts []string
	for _, ch := range []struct {
		name string
		draw func(string) error
	}{{"throughput.png", s.ThroughputChart}, {"latency-cdf.png", s.LatencyChart},
		{"latency-time.png", s.LatencyOverTimeChart}, {"sustained.png", s.SustainedChart}} {
		if narrow && ch.name == "sustained.png" {
			continue // a narrow run has no sustained runs
		}
		if err := ch.draw(filepath.Join(chartDir, prefix+ch.name)); errors.Is(err, bench.ErrNoData) {
			os.Remove(filepath.Join(chartDir, prefix+ch.name)) // an older run's would be taken for this one's
			continue
		} else if err != nil {
			return err
		}
		charts = append(charts, filepath.ToSlash(filepath.Join(rel, prefix+ch.name)))
	}
	doc, err := os.ReadFile(out)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.WriteFile(out, []byte(rewrite(string(doc), s.Markdown(charts))), 0o644)
}

// splitList splits a comma-separated flag value; empty gives nil.
func splitList(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// load reads a suite's results written by -json.
func load(path string) (*bench.Suite, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s bench.Suite
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	return &s, nil
}
