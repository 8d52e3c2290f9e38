package client_test

import (
	"sync/atomic"
	"testing"
	"time"

	"sluice/client"
	"sluice/wire"
)

// TestConsumerDescriptionBehindLayouts: a consumer starts while the broker it asks has
// not read the topic's last expansion yet: the layouts (which the broker reads from
// ZooKeeper) have 4 partitions, every switch recorded, while the broker's description
// still lists the 2 of the layout before. The consumer must read all 4 (here the proxy
// plays that broker: an embedded topic of 4 partitions, described as 2 at first).
// Before the fix it read the 2 described and never looked again: the layouts it had
// were complete and the metadata's version no newer, so the other 2 partitions' records
// were never delivered.
func TestConsumerDescriptionBehindLayouts(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b.Addr, "behind", 4)
	p := newProducer(t, b.Addr, "behind")
	ctx := ctxFor(t, 30*time.Second)
	const n = 400
	for i := range n {
		if err := p.Produce(ctx, &client.Record{Key: value(uint64(i), 8), Value: value(uint64(i), 8)}); err != nil {
			t.Fatal(err)
		}
	}
	closeProducer(t, p)
	var describes atomic.Int64
	edit := func(body wire.Body) {
		switch body := body.(type) {
		case *wire.TopicLayoutsResponse: // expanded from 2 to 4 at version 2, both old partitions switched at 0
			body.Layouts = []wire.Layout{{Version: 1, Partitions: 2}, {Version: 2, Partitions: 4, Switches: []int64{0, 0}}}
		case *wire.MetadataResponse:
			for i := range body.Topics {
				body.Topics[i].Version = 2
			}
		case *wire.DescribeTopicResponse:
			body.Version = 2
			if describes.Add(1) == 1 { // the first description is of the layout before
				body.Version, body.Partitions = 1, body.Partitions[:2]
				for i := range body.Partitions {
					lo, hi := wire.LogicalRange(i, 2)
					body.Partitions[i].Lo, body.Partitions[i].Hi = uint32(lo), uint32(hi)
				}
			}
		}
	}
	proxy := startEditProxy(t, b.Addr, func(_, _ int) string { return b.Addr }, edit)
	c, err := client.NewConsumer(ctx, "behind", client.Brokers(proxy.Addr()), client.Start(client.Oldest()),
		client.FetchMaxWait(50*time.Millisecond), client.RetryBackoff(time.Millisecond, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := map[int]int{}
	deadline := time.Now().Add(10 * time.Second)
	for got[0]+got[1]+got[2]+got[3] < n {
		if time.Now().After(deadline) {
			t.Fatalf("read %v of %d records in 10 s", got, n)
		}
		if err := c.Poll(ctx); err != nil {
			t.Fatalf("poll after %v records: %v", got, err)
		}
		for c.Next() {
			got[c.Partition()]++
		}
		if err := c.Err(); err != nil {
			t.Fatal(err)
		}
	}
}
