package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"sluice/client"
	"sluice/wire"
)

// The topic commands: `sluice topic create NAME --partitions N --broker ADDR` and
// `sluice topic describe NAME --broker ADDR`, through the client's admin calls. This file
// also holds the flag helpers of the client commands (produce, consume).

func topicCreate(args []string, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("topic create", flag.ContinueOnError)
	broker := brokerFlag(fs)
	parts := fs.Int("partitions", 1, "number of physical partitions, 1..65536")
	var o wire.TopicOptions
	fs.Int64Var(&o.RetentionMs, "retention-ms", 0, "retention by age in ms (0 broker default, -1 forever)")
	fs.Int64Var(&o.RetentionBytes, "retention-bytes", 0, "retention by size per partition (0 default, -1 none)")
	fs.Int64Var(&o.SegmentBytes, "segment-bytes", 0, "segment size (0 default)")
	fs.Int64Var(&o.SegmentMs, "segment-ms", 0, "segment age in ms (0 default, -1 never)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	name, err := parseWithName(fs, args)
	if err != nil {
		return err
	}
	if *parts < 1 || *parts > wire.MaxPartitions {
		return usageError{fmt.Sprintf("--partitions %d out of 1..65536", *parts)}
	}
	ctx, cancel := commandContext(*timeout)
	defer cancel()
	a, err := client.NewAdmin(client.Brokers(*broker))
	if err != nil {
		return usageError{err.Error()}
	}
	defer a.Close()
	t, err := a.CreateTopic(ctx, name, *parts, o)
	if err != nil {
		return problemError{err}
	}
	fmt.Fprintf(stdout, "created topic %s: version %d, %d partitions\n", t.Name, t.Version, len(t.Partitions))
	return nil
}

func topicDescribe(args []string, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("topic describe", flag.ContinueOnError)
	broker := brokerFlag(fs)
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	name, err := parseWithName(fs, args)
	if err != nil {
		return err
	}
	ctx, cancel := commandContext(*timeout)
	defer cancel()
	a, err := client.NewAdmin(client.Brokers(*broker))
	if err != nil {
		return usageError{err.Error()}
	}
	defer a.Close()
	d, err := a.DescribeTopic(ctx, name)
	if err != nil {
		return problemError{err}
	}
	printDescription(stdout, d)
	return nil
}

func printDescription(w io.Writer, d *wire.DescribeTopicResponse) {
	o := d.Options
	fmt.Fprintf(w, "topic %s version %d partitions %d\n", d.Name, d.Version, len(d.Partitions))
	fmt.Fprintf(w, "options retention-ms=%d retention-bytes=%d segment-bytes=%d segment-ms=%d\n",
		o.RetentionMs, o.RetentionBytes, o.SegmentBytes, o.SegmentMs)
	fmt.Fprintf(w, "%9s %13s %21s %10s %10s %10s %20s\n", "partition", "logical", "broker", "start", "next", "durable", "session")
	for _, p := range d.Partitions {
		fmt.Fprintf(w, "%9d %6d-%-6d %21s %10d %10d %10d %20d\n", p.ID, p.Lo, p.Hi-1, p.Addr,
			p.LogStartOffset, p.NextOffset, p.Checkpoint, p.Session)
	}
}

// brokerFlag defines --broker, the seed broker of every client command.
func brokerFlag(fs *flag.FlagSet) *string {
	return fs.String("broker", "127.0.0.1:9440", "broker address host:port")
}

// parseWithName parses flags placed before or after the single NAME argument.
func parseWithName(fs *flag.FlagSet, args []string) (string, error) {
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", usageError{"want exactly one topic name"}
	}
	return pos[0], nil
}

// parseInterspersed parses flags that may come before, between or after positional
// arguments, and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// commandContext is canceled by SIGINT or SIGTERM, or after timeout when it is positive.
func commandContext(timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if timeout <= 0 {
		return ctx, stop
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	return tctx, func() { cancel(); stop() }
}

// noPositional refuses positional arguments.
func noPositional(fs *flag.FlagSet, args []string) error {
	pos, err := parseInterspersed(fs, args)
	if err == nil && len(pos) > 0 {
		err = usageError{"unexpected argument " + strings.Join(pos, " ")}
	}
	return err
}
