package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"sluice/admin"
)

// clusterStatus prints a distributed cluster's state from ZooKeeper: the live brokers
// with their load, then every topic's partitions with the broker that owns each, its
// epoch, and the produce rate and HDFS lag its broker last reported (every 5 s).
func clusterStatus(args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("cluster status", flag.ContinueOnError)
	zkf := newZKFlags(fs)
	timeout := fs.Duration("timeout", 10*time.Second, "give up after this long")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	c, err := zkf.dial(context.Background(), *timeout, *timeout, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	brokers, err := c.Brokers()
	if err != nil {
		return err
	}
	topics, err := c.Topics()
	if err != nil {
		return err
	}
	owners, err := c.Owners()
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "BROKER\tADDRESS\tCAPACITY\tLOAD\tPARTITIONS\n")
	held := map[string]int{}
	for _, o := range owners {
		held[o.Broker]++
	}
	for _, b := range brokers {
		if b.Unreadable {
			fmt.Fprintf(w, "%s\t(unreadable registration)\t-\t-\t%d\n", b.ID, held[b.ID])
			continue
		}
		fmt.Fprintf(w, "%s\t%s\t%g\t%g\t%d\n", b.ID, b.Addr, b.Capacity, b.Load, held[b.ID])
	}
	loads := map[string]admin.PartLoad{} // as each partition's owner reports them
	for _, b := range brokers {
		for k, l := range b.Partitions {
			if o, ok := owners[admin.ParseLoadKey(k)]; ok && o.Broker == b.ID {
				loads[k] = l
			}
		}
	}
	fmt.Fprintf(w, "\nTOPIC\tPARTITION\tBROKER\tEPOCH\tBYTES/S\tHDFS LAG\n")
	names := make([]string, 0, len(topics))
	for n := range topics {
		names = append(names, n)
	}
	slices.Sort(names)
	live := map[string]bool{}
	for _, b := range brokers {
		live[b.ID] = true
	}
	for _, n := range names {
		for i := range topics[n].Partitions {
			o, ok := owners[admin.PartitionID{Topic: n, ID: i}]
			switch {
			case !ok || o.Broker == "":
				fmt.Fprintf(w, "%s\t%d\t(unassigned)\t\n", n, i)
			case !live[o.Broker]:
				fmt.Fprintf(w, "%s\t%d\t%s (not live)\t%d\n", n, i, o.Broker, o.Epoch)
			default:
				l, ok := loads[admin.LoadKey(admin.PartitionID{Topic: n, ID: i})]
				if !ok {
					fmt.Fprintf(w, "%s\t%d\t%s\t%d\t-\t-\n", n, i, o.Broker, o.Epoch)
					continue
				}
				fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%.0f\t%.1fs\n", n, i, o.Broker, o.Epoch, l.BytesPerSec, l.HDFSLag)
			}
		}
	}
	return w.Flush()
}
