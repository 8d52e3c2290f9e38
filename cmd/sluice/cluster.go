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

// clusterStatus prints a distributed cluster's state from ZooKeeper: the live brokers,
// then every topic's partitions with the broker that owns each and its epoch.
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
	brokers, _, err := c.Brokers()
	if err != nil {
		return err
	}
	topics, _, err := c.Topics()
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
		fmt.Fprintf(w, "%s\t%s\t%g\t%g\t%d\n", b.ID, b.Addr, b.Capacity, b.Load, held[b.ID])
	}
	fmt.Fprintf(w, "\nTOPIC\tPARTITION\tBROKER\tEPOCH\n")
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
				fmt.Fprintf(w, "%s\t%d\t%s\t%d\n", n, i, o.Broker, o.Epoch)
			}
		}
	}
	return w.Flush()
}
