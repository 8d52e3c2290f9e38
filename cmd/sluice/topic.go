package main

import (
	"context"
	"errors"
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
// `sluice topic describe NAME --broker ADDR` (and `topic expand`, topic_expand.go),
// through the client's admin calls, and the
// context helpers of the client commands (produce, consume).

func topicCreate(args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("topic create", flag.ContinueOnError)
	broker := brokerFlag(fs)
	tf := newSecurityFlags(fs)
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
	if err := checkTopicOptions(o); err != nil {
		return err
	}
	ctx, cancel := commandContext(*timeout)
	defer cancel()
	a, err := newAdmin(*broker, tf)
	if err != nil {
		return err
	}
	defer a.Close()
	t, err := a.CreateTopic(ctx, name, *parts, o)
	if err != nil {
		return reachError(ctx, err, *broker, *timeout)
	}
	fmt.Fprintf(stdout, "created topic %s: version %d, %d partitions\n", t.Name, t.Version, len(t.Partitions))
	return nil
}

func topicDescribe(args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("topic describe", flag.ContinueOnError)
	broker := brokerFlag(fs)
	tf := newSecurityFlags(fs)
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	name, err := parseWithName(fs, args)
	if err != nil {
		return err
	}
	ctx, cancel := commandContext(*timeout)
	defer cancel()
	a, err := newAdmin(*broker, tf)
	if err != nil {
		return err
	}
	defer a.Close()
	d, err := a.DescribeTopic(ctx, name)
	if err != nil {
		return reachError(ctx, err, *broker, *timeout)
	}
	stateFromOwners(ctx, d, *broker, tf)
	printDescription(stdout, d)
	return nil
}

// stateFromOwners fills in the state of the partitions that the broker asked does not
// serve (a cluster's broker knows every partition's owner, but the windows only of its
// own) by asking each owner. An owner that cannot be reached leaves its partitions'
// state empty (session 0), as for a partition no broker serves.
func stateFromOwners(ctx context.Context, d *wire.DescribeTopicResponse, asked string, tf securityFlags) {
	byOwner := map[string][]int{}
	for i, p := range d.Partitions {
		if p.Session == 0 && p.Addr != "" && p.Addr != asked {
			byOwner[p.Addr] = append(byOwner[p.Addr], i)
		}
	}
	for addr, idx := range byOwner {
		a, err := newAdmin(addr, tf)
		if err != nil {
			continue
		}
		od, err := a.DescribeTopic(ctx, d.Name)
		a.Close()
		if err != nil {
			continue
		}
		for _, i := range idx {
			if i < len(od.Partitions) && od.Partitions[i].Addr == addr {
				d.Partitions[i] = od.Partitions[i]
			}
		}
	}
}

// checkTopicOptions refuses options below their range, and millisecond options too
// large to be a duration (wire.MaxTopicMs), before anything is sent.
func checkTopicOptions(o wire.TopicOptions) error {
	var bad []string
	ms := func(name string, v int64) {
		if v < -1 || v > wire.MaxTopicMs {
			bad = append(bad, fmt.Sprintf("--%s %d out of -1..%d", name, v, wire.MaxTopicMs))
		}
	}
	ms("retention-ms", o.RetentionMs)
	ms("segment-ms", o.SegmentMs)
	if o.RetentionBytes < -1 {
		bad = append(bad, fmt.Sprintf("--retention-bytes %d below -1", o.RetentionBytes))
	}
	if o.SegmentBytes < 0 {
		bad = append(bad, fmt.Sprintf("--segment-bytes %d is negative", o.SegmentBytes))
	}
	if len(bad) > 0 {
		return usageError{strings.Join(bad, "; ")}
	}
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

// commandContext is canceled by SIGINT or SIGTERM, or after timeout when it is positive.
func commandContext(timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if timeout <= 0 {
		return ctx, stop
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	return tctx, func() { cancel(); stop() }
}

// reachError returns err, saying so first when ctx's timeout ran out (the broker did not
// answer in time: it may be down or unreachable).
func reachError(ctx context.Context, err error, broker string, timeout time.Duration) error {
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return fmt.Errorf("no answer from broker %s within --timeout %v: %w", broker, timeout, err)
	}
	return err
}

// newAdmin connects the admin calls of a topic command.
func newAdmin(broker string, tf securityFlags) (*client.Admin, error) {
	opts, err := tf.opts()
	if err != nil {
		return nil, err
	}
	a, err := client.NewAdmin(append(opts, client.Brokers(broker))...)
	if err != nil {
		return nil, usageError{err.Error()}
	}
	return a, nil
}
