package test

import (
	"context"
	"testing"
	"time"

	"sluice/client"
	"sluice/wire"
)

// TestClusterConsumerStartPositions: in a cluster, a consumer that starts from the newest
// record or at an offset starts every partition there, those served by a broker other
// than the one it asked included (a broker describes only the partitions it serves).
func TestClusterConsumerStartPositions(t *testing.T) {
	c := startCluster(t, 2)
	c.createTopic(t, "s", 2)
	parts := owners(t, c.brokers[0].Addr, "s")
	next := make([]int64, len(parts))
	for part, addr := range parts {
		w := dial(t, addr)
		for range 3 {
			waitFor(t, "the partition to take writes", func() bool {
				r := w.call(&wire.ProduceRequest{Topic: []byte("s"), Partition: uint32(part), Version: 1,
					Batches: records(0, -1, "r", 4)})
				return r.Header.Code == wire.CodeNone
			})
		}
		resp := w.call(&wire.DescribeTopicRequest{Name: "s"})
		mustOK(t, resp)
		next[part] = resp.Body.(*wire.DescribeTopicResponse).Partitions[part].NextOffset
		if next[part] != 12 {
			t.Fatalf("partition %d ends at %d, want 12", part, next[part])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name  string
		start client.StartAt
		want  []int64
	}{{"newest", client.Newest(), next}, {"offset 5", client.AtOffset(5), []int64{5, 5}}} {
		cs, err := client.NewConsumer(ctx, "s", client.Brokers(c.brokers[0].Addr), client.Start(tc.start))
		if err != nil {
			t.Fatal(err)
		}
		for part := range parts {
			if got, _ := cs.Position(part); got != tc.want[part] {
				t.Errorf("start at %s: partition %d (on %s; asked %s) starts at %d, want %d", tc.name, part, parts[part],
					c.brokers[0].Addr, got, tc.want[part])
			}
		}
		cs.Close()
	}
}

// TestClusterConsumerStartsAroundUnplacedPartitions: while the new partitions of an
// expansion have no broker (no admin places them), a consumer that starts at a time
// reads the partitions that have one, as one starting from the oldest record does.
func TestClusterConsumerStartsAroundUnplacedPartitions(t *testing.T) {
	c := startCluster(t, 1)
	c.createTopic(t, "u", 2)
	b := c.brokers[0]
	w := dial(t, b.Addr)
	for part := range uint32(2) {
		waitFor(t, "the partition to take writes", func() bool {
			r := w.call(&wire.ProduceRequest{Topic: []byte("u"), Partition: part, Version: 1, Batches: records(0, -1, "r", 4)})
			return r.Header.Code == wire.CodeNone
		})
	}
	c.admins[0].Process.Kill() // nobody places the new partitions
	a, ctx := clusterAdmin(t, c)
	if _, err := a.ExpandTopic(ctx, "u", 4); err != nil {
		t.Fatal(err)
	}
	waitExpandedWireTopic(t, w, "u", 2)
	for _, tc := range []struct {
		name  string
		start client.StartAt
	}{{"oldest", client.Oldest()}, {"at a time", client.AtTime(time.Now().Add(-time.Hour))}} {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		cs, err := client.NewConsumer(sctx, "u", client.Brokers(b.Addr), client.Start(tc.start),
			client.FetchMaxWait(50*time.Millisecond))
		if err != nil {
			cancel()
			t.Fatalf("start %s: %v", tc.name, err)
		}
		n := 0
		for n < 8 {
			if err := cs.Poll(sctx); err != nil {
				t.Fatalf("start %s: read %d of 8: %v", tc.name, n, err)
			}
			for cs.Next() {
				n++
			}
		}
		cs.Close()
		cancel()
	}
}

// waitExpandedWireTopic is waitExpandedWire for any topic.
func waitExpandedWireTopic(t *testing.T, w *wireConn, topic string, v uint32) {
	t.Helper()
	waitFor(t, "every old partition to switch", func() bool {
		resp := w.call(&wire.TopicLayoutsRequest{Name: topic})
		mustOK(t, resp)
		for _, l := range resp.Body.(*wire.TopicLayoutsResponse).Layouts {
			if l.Version == v {
				for _, s := range l.Switches {
					if s < 0 {
						return false
					}
				}
				return true
			}
		}
		return false
	})
}
