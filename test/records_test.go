package test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"sluice/batch"
	"sluice/client"
	"sluice/internal/batchtest"
	"sluice/internal/testbroker"
	"sluice/wire"
)

// unreadable returns batches whose header and CRC are right and whose records no consumer
// can read (a producer's bug, or a hostile one): batchtest.Unreadable's, without
// idempotence, and one routed by a layout the topic does not have.
func unreadable(t *testing.T) map[string][]byte {
	t.Helper()
	out := batchtest.Unreadable(t, -1, -1, time.Now().UnixMilli())
	var stamped batch.Builder // routed by a layout (version 2) the topic, at 1, does not have
	stamped.Reset(nil, -1, -1)
	stamped.SetLayout(2)
	stamped.Add(0, time.Now().UnixMilli(), nil, []byte("x"))
	out["layout 2 at version 1"] = stamped.Finish()
	return out
}

// TestUnreadableBatchesRefused: a broker refuses a produced batch whose records cannot be
// read (corrupt_batch), so that a consumer of the partition reads on past where it
// would have been: before, such a batch was stored and acknowledged, and every consumer
// stopped at it for good. A broker started with broker.trust_records stores it, as
// documented.
func TestUnreadableBatchesRefused(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	w := dial(t, b.Addr)
	createTopic(t, w, "rec", 1)
	produce := func(batches []byte) *wire.Response {
		return w.call(&wire.ProduceRequest{Topic: []byte("rec"), Version: 1, Batches: batches})
	}
	mustOK(t, produce(records(-1, -1, "before", 2)))
	for name, bt := range unreadable(t) {
		if resp := produce(bt); resp.Header.Code != wire.CodeCorruptBatch {
			t.Errorf("%s: answered %v (%s), want corrupt_batch", name, resp.Header.Code, resp.Text)
		}
	}
	mustOK(t, produce(records(-1, -1, "after", 2)))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := readValues(ctx, b.Addr, 4)
	if want := []string{"before-0", "before-1", "after-0", "after-1"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("read %v, %v; want %v", got, err, want)
	}

	// A broker trusting its producers stores such a batch. A consumer stops at it with a
	// *BatchError saying where it ends, and one started there reads on, the batch's
	// records lost.
	trusting := testbroker.Start(t, t.TempDir(), "-broker.trust_records", "true")
	tw := dial(t, trusting.Addr)
	createTopic(t, tw, "rec", 1)
	mustOK(t, tw.call(&wire.ProduceRequest{Topic: []byte("rec"), Version: 1, Batches: records(-1, -1, "before", 2)}))
	bt := unreadable(t)["zstd junk"] // 2 records, offsets 2 and 3
	if resp := tw.call(&wire.ProduceRequest{Topic: []byte("rec"), Version: 1, Batches: bt}); resp.Header.Code != wire.CodeNone {
		t.Fatalf("a broker trusting its producers' records answered %v (%s), want the batch stored", resp.Header.Code, resp.Text)
	}
	mustOK(t, tw.call(&wire.ProduceRequest{Topic: []byte("rec"), Version: 1, Batches: records(-1, -1, "after", 2)}))
	got, err = readValues(ctx, trusting.Addr, 2)
	var be *client.BatchError
	if !slices.Equal(got, []string{"before-0", "before-1"}) || !errors.As(err, &be) || !errors.Is(err, batch.ErrCorrupt) ||
		be.Partition != 0 || be.Offset != 2 || be.Next != 4 {
		t.Fatalf("read %v, then %v (%+v); want the two records before, then a *BatchError at offset 2, next 4", got, err, be)
	}
	got, err = readValues(ctx, trusting.Addr, 2, client.StartPositions(map[int]int64{be.Partition: be.Next}))
	if err != nil || !slices.Equal(got, []string{"after-0", "after-1"}) {
		t.Fatalf("started past the batch: read %v, %v", got, err)
	}
}

// readValues reads the values of topic rec until n came or reading fails.
func readValues(ctx context.Context, addr string, n int, opts ...client.Opt) ([]string, error) {
	c, err := client.NewConsumer(ctx, "rec", append([]client.Opt{client.Brokers(addr),
		client.FetchMaxWait(20 * time.Millisecond)}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var got []string
	for len(got) < n {
		if err := c.Poll(ctx); err != nil {
			return got, err
		}
		for c.Next() {
			got = append(got, string(c.Record().Value))
		}
		if err := c.Err(); err != nil {
			return got, err
		}
	}
	return got, nil
}

// TestMisroutedRecordsRefused: a batch stamped with the layout its producer routed it by
// is refused (corrupt_batch, naming the record and its logical id) when a record's
// logical id belongs to another partition in that layout, as a client's routing bug
// would send it, and the partition takes nothing of it; the same batch routed right is
// taken. A batch without a stamp (a client that does not say its layout) is not held to
// one. The Go client's keyed and keyless records over four partitions all pass.
func TestMisroutedRecordsRefused(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	w := dial(t, b.Addr)
	createTopic(t, w, "route", 4)
	batchOf := func(layout uint16, logical uint16) []byte {
		var bb batch.Builder
		bb.Reset(nil, -1, -1)
		bb.SetLayout(layout)
		bb.Add(logical, time.Now().UnixMilli(), nil, []byte("routed by layout 1"))
		bb.Add(logical+1, time.Now().UnixMilli(), nil, []byte("its neighbour"))
		return bb.Finish()
	}
	produce := func(part uint32, batches []byte) *wire.Response {
		return w.call(&wire.ProduceRequest{Topic: []byte("route"), Partition: part, Version: 1, Batches: batches})
	}
	lo2, _ := wire.LogicalRange(2, 4) // partition 2's first logical id in layout 1
	if resp := produce(1, batchOf(1, uint16(lo2))); resp.Header.Code != wire.CodeCorruptBatch || !strings.Contains(resp.Text, fmt.Sprintf("logical id %d", lo2)) {
		t.Fatalf("a batch of partition 2's records produced to partition 1: %v (%s), want corrupt_batch naming logical id %d", resp.Header.Code, resp.Text, lo2)
	}
	mustOK(t, produce(2, batchOf(1, uint16(lo2))))
	mustOK(t, produce(1, batchOf(0, uint16(lo2)))) // no stamp: not held to a layout
	if got := fetchValues(t, w, "route", 1, 0); len(got) != 2 {
		t.Fatalf("partition 1 holds %v, want only the unstamped batch's 2 records", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := client.NewProducer(ctx, "route", client.Brokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	for i := range 400 {
		r := &client.Record{Value: fmt.Appendf(nil, "v%d", i)}
		if i%2 == 0 {
			r.Key = fmt.Appendf(nil, "key %d", i)
		}
		if err := p.Produce(ctx, r); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("the client's own routing refused: %v", err)
	}
}
