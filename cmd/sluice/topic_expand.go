package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"sluice/client"
	"sluice/wire"
)

// `sluice topic expand NAME --partitions N --broker ADDR`: raise a topic's partition
// count online (distributed mode; docs/cluster.md, "Expansion"), then wait until every
// partition is placed on a broker and every old one has switched to the new layout.

func topicExpand(args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("topic expand", flag.ContinueOnError)
	broker := brokerFlag(fs)
	tf := newSecurityFlags(fs)
	parts := fs.Int("partitions", 0, "the new number of physical partitions: more than the topic has, at most 65536")
	wait := fs.Bool("wait", true, "wait until every partition is placed and every old one switched to the new layout")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long (the expansion itself stays done)")
	name, err := parseWithName(fs, args)
	if err != nil {
		return err
	}
	if *parts < 2 || *parts > wire.MaxPartitions {
		return usageError{fmt.Sprintf("--partitions %d out of 2..65536", *parts)}
	}
	ctx, cancel := commandContext(*timeout)
	defer cancel()
	a, err := newAdmin(*broker, tf)
	if err != nil {
		return err
	}
	defer a.Close()
	t, err := a.ExpandTopic(ctx, name, *parts)
	if err != nil {
		return reachError(ctx, err, *broker, *timeout)
	}
	fmt.Fprintf(stdout, "expanded topic %s: version %d, %d partitions\n", t.Name, t.Version, len(t.Partitions))
	if !*wait {
		return nil
	}
	if err := waitExpanded(ctx, a, name, t.Version); err != nil {
		return reachError(ctx, fmt.Errorf("topic %s is expanded, but not yet in service: %w", name, err), *broker, *timeout)
	}
	fmt.Fprintf(stdout, "every partition of %s is placed and switched to version %d\n", name, t.Version)
	return nil
}

// waitExpanded polls until every partition of the topic has a broker and every partition
// of the previous layout recorded its switch to version.
func waitExpanded(ctx context.Context, a *client.Admin, name string, version uint32) error {
	for {
		placed, switched, err := expandState(ctx, a, name, version)
		if err == nil && placed && switched {
			return nil
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("placed %v, switched %v", placed, switched)
			}
			return fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
	}
}

// expandState reports whether every partition of the topic has an address and whether
// every partition of the layout before version switched to it.
func expandState(ctx context.Context, a *client.Admin, name string, version uint32) (placed, switched bool, err error) {
	ts, err := a.Metadata(ctx, name)
	if err != nil || len(ts) != 1 {
		return false, false, err
	}
	placed = true
	for _, p := range ts[0].Partitions {
		placed = placed && p.Addr != ""
	}
	ls, err := a.TopicLayouts(ctx, name)
	if err != nil {
		return placed, false, err
	}
	for _, l := range ls {
		if l.Version != version {
			continue
		}
		switched = true
		for _, s := range l.Switches {
			switched = switched && s >= 0
		}
	}
	return placed, switched, nil
}
