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
