package test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"sluice/batch"
	"sluice/broker"
	"sluice/internal/peer/hdfstest"
	"sluice/internal/testbroker"
	"sluice/persist/hdfs"
	"sluice/persist/vfs"
	"sluice/persist/vfs/errorfs"
	"sluice/wire"
)

// hdfsValues reads a partition's data on HDFS, as any reader would (persist/hdfs), and
// returns its record values in offset order, checking that offsets follow each other
// from the first file's base to the end.
func hdfsValues(t *testing.T, addr, topic string, part int) []string {
	t.Helper()
	conn, err := hdfs.NewConn(hdfs.Options{Addresses: []string{addr}, User: "test", Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	r := hdfs.NewReader(conn, hdfs.PartitionDir("/sluice", topic, part), nil)
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	start, ok := r.Start()
	if !ok {
		return nil
	}
	end, _, err := r.End(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var vals []string
	for o := start; o < end; {
		b, next, err := r.Read(ctx, o, 1<<20)
		if err != nil {
			t.Fatalf("read %s/%d at %d from HDFS: %v", topic, part, o, err)
		}
		for len(b) > 0 {
			var it batch.Iter
			if err := it.Reset(b); err != nil {
				t.Fatal(err)
			}
			h := it.Header()
			if h.BaseOffset != o {
				t.Fatalf("batch at %d on HDFS, want %d", h.BaseOffset, o)
			}
			for it.Next() {
				vals = append(vals, string(it.Record().Value))
			}
			o = h.LastOffset() + 1
			b = b[h.Size():]
		}
		if o != next {
			t.Fatalf("read to %d, next %d", o, next)
		}
	}
	return vals
}

// produceWait produces n records with values prefix-i, waiting up to wait for the
// checkpoint, and returns the answer.
func produceWait(t *testing.T, w *wireConn, topic string, part uint32, prefix string, n int, wait time.Duration) *wire.ProduceResponse {
	t.Helper()
	resp := w.call(&wire.ProduceRequest{Topic: []byte(topic), Partition: part, Version: 1,
		WaitDurableMs: uint32(wait / time.Millisecond), Batches: records(0, -1, prefix, n)})
	mustOK(t, resp)
	return resp.Body.(*wire.ProduceResponse)
}

// TestShipToHDFS runs a broker in distributed mode against a real HDFS: the checkpoint
// waits for HDFS; with HDFS down producers keep going and C stops; once HDFS is back
// the backlog ships and C catches up; a restarted broker (a new epoch) continues where
// HDFS ends. HDFS ends up holding every record exactly once, in order.
func TestShipToHDFS(t *testing.T) {
	c := hdfstest.Start(t)
	b := testbroker.Start(t, t.TempDir(), "-metrics", "127.0.0.1:0", "-hdfs.addr", c.Addr,
		"-hdfs.timeout", "2s", "-hdfs.commit_interval", "20ms", "-hdfs.roll_bytes", "64KiB")
	w := dial(t, b.Addr)
	createTopic(t, w, "h", 2)
	var want []string
	for i := range 20 {
		pr := produceWait(t, w, "h", 1, fmt.Sprintf("a%d", i), 50, 30*time.Second)
		if pr.Checkpoint < pr.LastOffset {
			t.Fatalf("acks=persisted answered before HDFS had it: %+v", pr)
		}
		for j := range 50 {
			want = append(want, fmt.Sprintf("a%d-%d", i, j))
		}
	}
	if got := hdfsValues(t, c.Addr, "h", 1); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("HDFS holds %d records, want %d", len(got), len(want))
	}

	// HDFS down: producers are answered, C stays below what they produced.
	c.Kill()
	frozen := produceWait(t, w, "h", 1, "b", 50, 0)
	want = appendValues(want, "b", 50)
	pr := produceWait(t, w, "h", 1, "c", 50, 1500*time.Millisecond)
	want = appendValues(want, "c", 50)
	if pr.Checkpoint >= frozen.BaseOffset {
		t.Fatalf("C moved to %d with HDFS down (the batch at %d was never shipped)", pr.Checkpoint, frozen.BaseOffset)
	}
	deadline := time.Now().Add(time.Minute)
	for scrape(t, b.MetricsAddr, `sluice_partition_hdfs_failing{partition="1",topic="h"}`) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the partition never reported failing shipments")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if lag := scrape(t, b.MetricsAddr, `sluice_partition_hdfs_lag_offsets{partition="1",topic="h"}`); lag < 100 {
		t.Fatalf("HDFS lag %v offsets, want at least 100", lag)
	}
	if lag := scrape(t, b.MetricsAddr, `sluice_partition_hdfs_lag_bytes{partition="1",topic="h"}`); lag < 100*8 {
		t.Fatalf("HDFS lag %v bytes, want at least the 100 records' values", lag)
	}

	// HDFS back: the backlog ships, C catches up.
	c.Restart(t)
	pr = produceWait(t, w, "h", 1, "d", 50, 60*time.Second)
	want = appendValues(want, "d", 50)
	if pr.Checkpoint < pr.LastOffset {
		t.Fatalf("C did not catch up once HDFS was back: %+v", pr)
	}
	if got := hdfsValues(t, c.Addr, "h", 1); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the outage HDFS holds %d records, want %d:\n%v", len(got), len(want), got)
	}

	// A restart is a new epoch: shipping resumes at HDFS's end.
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	b.Restart()
	w = dial(t, b.Addr)
	pr = produceWait(t, w, "h", 1, "e", 50, 30*time.Second)
	want = appendValues(want, "e", 50)
	if pr.Checkpoint < pr.LastOffset {
		t.Fatalf("after a restart: %+v", pr)
	}
	if got := hdfsValues(t, c.Addr, "h", 1); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after a broker restart HDFS holds %d records, want %d", len(got), len(want))
	}
	if got := hdfsValues(t, c.Addr, "h", 0); len(got) != 0 {
		t.Fatalf("partition 0 was never produced to, HDFS holds %d records of it", len(got))
	}
}

func appendValues(vals []string, prefix string, n int) []string {
	for i := range n {
		vals = append(vals, fmt.Sprintf("%s-%d", prefix, i))
	}
	return vals
}

// TestFetchFromHDFS: once retention removed a partition's old segments here (only what
// HDFS acknowledged may go), a fetch from the first offset reads them back from HDFS,
// through the arena's block cache, then goes on from the local segments: every record
// once, in order.
func TestFetchFromHDFS(t *testing.T) {
	c := hdfstest.Start(t)
	_, w, want := retainedOnHDFS(t, c, "r")
	if got := fetchValues(t, w, "r", 0, 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("fetched %d records, want %d", len(got), len(want))
	}
	// The earliest offset is HDFS's start, not the local one.
	resp := w.call(&wire.ListOffsetsRequest{Topic: []byte("r"), Partition: 0, Timestamp: wire.TimestampEarliest})
	mustOK(t, resp)
	if lo := resp.Body.(*wire.ListOffsetsResponse); lo.Offset != 0 || lo.LogStartOffset != 0 {
		t.Fatalf("earliest %+v, want offset 0 (on HDFS)", lo)
	}
}

// retainedOnHDFS starts a broker shipping to c, produces 60 batches of 40 records to
// a new one-partition topic whose retention keeps 8 KiB here, and returns once offset 0
// is no longer held locally (a fetch of it went to HDFS), with the values produced.
func retainedOnHDFS(t *testing.T, c *hdfstest.Cluster, topic string) (*testbroker.Broker, *wireConn, []string) {
	t.Helper()
	b := testbroker.Start(t, t.TempDir(), "-metrics", "127.0.0.1:0", "-hdfs.addr", c.Addr,
		"-hdfs.commit_interval", "20ms", "-broker.retention_check", "100ms")
	w := dial(t, b.Addr)
	mustOK(t, w.call(&wire.CreateTopicRequest{Name: topic, Partitions: 1,
		Options: wire.TopicOptions{RetentionMs: -1, RetentionBytes: 8 << 10, SegmentBytes: 4 << 10, SegmentMs: -1}}))
	var want []string
	for i := range 60 {
		prefix := fmt.Sprintf("v%d", i)
		produceWaitBatch(t, w, topic, records(0, -1, prefix, 40)) // C covers it: it is on HDFS
		want = appendValues(want, prefix, 40)
	}
	deadline := time.Now().Add(time.Minute)
	for scrape(t, b.MetricsAddr, "sluice_hdfs_fetched_bytes_total") <= 0 {
		mustOK(t, w.call(&wire.FetchRequest{Topic: []byte(topic), Partition: 0, Offset: 0, MaxBytes: 1}))
		if time.Now().After(deadline) {
			t.Fatal("retention never removed the old segments (no fetch of offset 0 went to HDFS)")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return b, w, want
}

// TestLoadFromHDFS: a partition created on a broker with an empty data directory, over
// an HDFS that holds the partition from another broker, continues after HDFS's last
// batch: offsets go on, a resend of a batch HDFS holds is recognized as a duplicate (the
// producers' sequences come from HDFS's tail), and older offsets are served from HDFS.
func TestLoadFromHDFS(t *testing.T) {
	c := hdfstest.Start(t)
	args := []string{"-hdfs.addr", c.Addr, "-hdfs.commit_interval", "20ms"}
	a := testbroker.Start(t, t.TempDir(), args...)
	w := dial(t, a.Addr)
	createTopic(t, w, "m", 1)
	var want []string
	var last *wire.ProduceResponse
	lastBatch := records(42, 20, "b", 5)
	for i, batch := range [][]byte{records(42, 0, "a", 10), records(42, 10, "a2", 10), lastBatch} {
		resp := w.call(&wire.ProduceRequest{Topic: []byte("m"), Partition: 0, Version: 1, WaitDurableMs: 30000, Batches: batch})
		mustOK(t, resp)
		last = resp.Body.(*wire.ProduceResponse)
		if last.Checkpoint < last.LastOffset {
			t.Fatalf("batch %d not on HDFS: %+v", i, last)
		}
	}
	want = appendValues(appendValues(appendValues(want, "a", 10), "a2", 10), "b", 5)
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}

	b := testbroker.Start(t, t.TempDir(), args...) // a new host: nothing on its disk
	w = dial(t, b.Addr)
	createTopic(t, w, "m", 1)
	resp := w.call(&wire.ProduceRequest{Topic: []byte("m"), Partition: 0, Version: 1, Batches: lastBatch})
	mustOK(t, resp)
	if pr := resp.Body.(*wire.ProduceResponse); pr.BaseOffset != last.BaseOffset || pr.LastOffset != last.LastOffset {
		t.Fatalf("a resend of the last batch on HDFS was answered %+v, want the offsets it has there [%d, %d]",
			pr, last.BaseOffset, last.LastOffset)
	}
	pr := produceWaitBatch(t, w, "m", records(42, 25, "c", 5))
	if pr.BaseOffset != last.LastOffset+1 {
		t.Fatalf("new records at %d, want %d (after HDFS's last batch)", pr.BaseOffset, last.LastOffset+1)
	}
	want = appendValues(want, "c", 5)
	if got := fetchValues(t, w, "m", 0, 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("fetched %v\nwant %v", got, want)
	}
	if got := hdfsValues(t, c.Addr, "m", 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("HDFS holds %v\nwant %v", got, want)
	}
}

// produceWaitBatch produces one batch and waits for the checkpoint to cover it.
func produceWaitBatch(t *testing.T, w *wireConn, topic string, batch []byte) *wire.ProduceResponse {
	t.Helper()
	resp := w.call(&wire.ProduceRequest{Topic: []byte(topic), Partition: 0, Version: 1, WaitDurableMs: 30000, Batches: batch})
	mustOK(t, resp)
	pr := resp.Body.(*wire.ProduceResponse)
	if pr.Checkpoint < pr.LastOffset {
		t.Fatalf("not durable: %+v", pr)
	}
	return pr
}

// TestShutdownShipsTheRest: a broker stopping gives HDFS what it lacks before it exits
// (commit rounds are an hour apart here, so only the last round at shutdown ships).
func TestShutdownShipsTheRest(t *testing.T) {
	c := hdfstest.Start(t)
	b := testbroker.Start(t, t.TempDir(), "-hdfs.addr", c.Addr, "-hdfs.commit_interval", "1h")
	w := dial(t, b.Addr)
	createTopic(t, w, "s", 1)
	produceWait(t, w, "s", 0, "x", 30, 0)
	produceWait(t, w, "s", 0, "y", 30, 0)
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	want := appendValues(appendValues(nil, "x", 30), "y", 30)
	if got := hdfsValues(t, c.Addr, "s", 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after a clean stop HDFS holds %d records, want %d", len(got), len(want))
	}
}

// TestHDFSDownAtStart: a broker in distributed mode that starts while HDFS is down opens
// the partitions it holds data of from its local disk (and ships once HDFS is back),
// and keeps offline the partitions it holds nothing of (starting those at offset 0
// could reuse offsets HDFS holds) until HDFS answers: then they open by themselves.
func TestHDFSDownAtStart(t *testing.T) {
	c := hdfstest.Start(t)
	b := testbroker.Start(t, t.TempDir(), "-hdfs.addr", c.Addr, "-hdfs.timeout", "1s", "-hdfs.commit_interval", "20ms")
	w := dial(t, b.Addr)
	createTopic(t, w, "d", 2)
	produceWaitBatch(t, w, "d", records(0, -1, "a", 10)) // partition 0 only
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	c.Kill()
	b.Restart()
	w = dial(t, b.Addr)
	pr := produceWait(t, w, "d", 0, "b", 10, 0)
	if pr.BaseOffset != 10 {
		t.Fatalf("partition 0 after a start with HDFS down: %+v", pr)
	}
	resp := w.call(&wire.ProduceRequest{Topic: []byte("d"), Partition: 1, Version: 1, Batches: records(0, -1, "x", 1)})
	if resp.Header.Code != wire.CodeNotServing || !strings.Contains(resp.Text, "HDFS") {
		t.Fatalf("partition 1 (no local data, HDFS down): %v %s", resp.Header.Code, resp.Text)
	}
	c.Restart(t)
	if pr := produceWait(t, w, "d", 0, "c", 10, 60*time.Second); pr.Checkpoint < pr.LastOffset {
		t.Fatalf("C did not reach HDFS once it was back: %+v", pr)
	}
	want := appendValues(appendValues(appendValues(nil, "a", 10), "b", 10), "c", 10)
	if got := hdfsValues(t, c.Addr, "d", 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("HDFS holds %v", got)
	}
	// Partition 1 opens by itself now that HDFS answers, without a restart.
	waitFor(t, "partition 1 to open once HDFS is back", func() bool {
		r := w.call(&wire.ProduceRequest{Topic: []byte("d"), Partition: 1, Version: 1, WaitDurableMs: 30000,
			Batches: records(0, -1, "y", 5)})
		return r.Header.Code == wire.CodeNone
	})
	if got := hdfsValues(t, c.Addr, "d", 1); fmt.Sprint(got) != fmt.Sprint(appendValues(nil, "y", 5)) {
		t.Fatalf("partition 1 on HDFS holds %v", got)
	}
}

// TestPausedNameNodeUnderBroker: with the NameNode stopped (SIGSTOP) every HDFS call
// hangs; the shipper's calls time out on its own goroutines, and produces, fetches and
// the metrics endpoint keep answering. Once the NameNode runs again C catches up.
func TestPausedNameNodeUnderBroker(t *testing.T) {
	c := hdfstest.Start(t)
	b := testbroker.Start(t, t.TempDir(), "-metrics", "127.0.0.1:0", "-hdfs.addr", c.Addr,
		"-hdfs.timeout", "1s", "-hdfs.commit_interval", "20ms")
	w := dial(t, b.Addr)
	createTopic(t, w, "p", 1)
	produceWaitBatch(t, w, "p", records(0, -1, "a", 10))
	c.Pause()
	for i := range 20 {
		produceWait(t, w, "p", 0, fmt.Sprintf("b%d", i), 10, 0)
	}
	if got := fetchValues(t, w, "p", 0, 0); len(got) != 210 {
		t.Fatalf("fetched %d records with the NameNode paused, want 210", len(got))
	}
	deadline := time.Now().Add(time.Minute)
	for scrape(t, b.MetricsAddr, `sluice_partition_hdfs_failing{partition="0",topic="p"}`) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("shipping against a paused NameNode never reported failing")
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.Resume()
	if pr := produceWait(t, w, "p", 0, "c", 10, 60*time.Second); pr.Checkpoint < pr.LastOffset {
		t.Fatalf("C did not catch up after the NameNode resumed: %+v", pr)
	}
	if got := hdfsValues(t, c.Addr, "p", 0); len(got) != 220 {
		t.Fatalf("HDFS holds %d records, want 220", len(got))
	}
}

// TestLongHDFSOutageFillsTheDisk: with HDFS down for long, retention keeps every
// segment HDFS has not acknowledged, so the local disk fills with the backlog (the full
// disk is injected: errorfs, since filling a real disk is not an option here);
// producers are then refused with no_space, retriable, and nothing accepted is lost.
// Once HDFS is back and there is room again the backlog ships, C catches up, retention
// lets the shipped segments go, and HDFS holds every record once, in order.
func TestLongHDFSOutageFillsTheDisk(t *testing.T) {
	c := hdfstest.Start(t)
	disk := &fullDisk{}
	dir := t.TempDir()
	b, _ := startInProcessAt(t, dir, errorfs.Wrap(vfs.Default(), disk), 0, func(cfg *broker.Config) {
		cfg.RetentionCheck = 50 * time.Millisecond
		cfg.HDFS.Addresses = []string{c.Addr}
		cfg.HDFS.Conn.Timeout = time.Second
		cfg.HDFS.CommitInterval = 20 * time.Millisecond
	})
	w := dial(t, b.Addr())
	mustOK(t, w.call(&wire.CreateTopicRequest{Name: "o", Partitions: 1,
		Options: wire.TopicOptions{RetentionMs: -1, RetentionBytes: 8 << 10, SegmentBytes: 4 << 10, SegmentMs: -1}}))
	segments := func() int {
		files, _ := filepath.Glob(filepath.Join(dir, "o", "0", "*.log"))
		return len(files)
	}
	value := strings.Repeat("v", 200)
	var want []string
	produce := func(i int) wire.Code {
		prefix := fmt.Sprintf("%s%d", value, i)
		r := w.call(&wire.ProduceRequest{Topic: []byte("o"), Version: 1, Batches: records(0, -1, prefix, 5)})
		if r.Header.Code == wire.CodeNone {
			want = appendValues(want, prefix, 5)
		}
		return r.Header.Code
	}
	for i := range 20 { // shipped as it goes: retention keeps the log short
		if code := produce(i); code != wire.CodeNone {
			t.Fatalf("produce %d: %v", i, code)
		}
	}
	state := func() wire.PartitionState {
		r := w.call(&wire.DescribeTopicRequest{Name: "o"})
		mustOK(t, r)
		return r.Body.(*wire.DescribeTopicResponse).Partitions[0]
	}
	waitFor(t, "the first records on HDFS", func() bool { st := state(); return st.Checkpoint == st.NextOffset-1 })
	shipped := state().NextOffset // HDFS holds everything below
	c.Kill()
	for i := 20; i < 120; i++ {
		if code := produce(i); code != wire.CodeNone {
			t.Fatalf("produce %d with HDFS down: %v", i, code)
		}
	}
	time.Sleep(300 * time.Millisecond) // several retention passes
	files, _ := filepath.Glob(filepath.Join(dir, "o", "0", "*.log"))
	sort.Strings(files)
	if len(files) == 0 {
		t.Fatal("no segment left with HDFS down")
	}
	if first, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(files[0]), ".log"), 10, 64); err != nil || first > shipped {
		t.Fatalf("with HDFS down the local log starts at %s, above %d where HDFS ends: retention deleted what HDFS did not have (%v)",
			filepath.Base(files[0]), shipped, err)
	}
	disk.set(true) // the backlog has filled the disk
	refused := false
	for i := 120; i < 400 && !refused; i++ {
		switch code := produce(i); code {
		case wire.CodeNone:
		case wire.CodeNoSpace:
			refused = true
		default:
			t.Fatalf("produce on a full disk with HDFS down: %v", code)
		}
	}
	if !refused {
		t.Fatal("producers were never refused with the disk full of unshipped data")
	}
	c.Restart(t)
	disk.set(false)
	deadline := time.Now().Add(time.Minute)
	for produce(1000) != wire.CodeNone {
		if time.Now().After(deadline) {
			t.Fatal("produce never resumed once HDFS and space were back")
		}
		time.Sleep(20 * time.Millisecond)
	}
	pr := produceWaitBatch(t, w, "o", records(0, -1, "last", 1))
	want = appendValues(want, "last", 1)
	if pr.Checkpoint < pr.LastOffset {
		t.Fatalf("C did not catch up: %+v", pr)
	}
	if got := hdfsValues(t, c.Addr, "o", 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("HDFS holds %d records, want %d", len(got), len(want))
	}
	for deadline := time.Now().Add(time.Minute); segments() > 5; {
		if time.Now().After(deadline) {
			t.Fatalf("%d segments: retention never let the shipped ones go", segments())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCorruptHDFSDataNotServed: a file on HDFS whose batch fails its CRC, below where
// the partition's local data starts, makes a fetch there answer corrupt_data: never the
// damaged bytes, never a silent skip. (The damaged file is written with persist/hdfs's
// own writer, whose commit does not check CRCs: the fault a real disk would cause.)
func TestCorruptHDFSDataNotServed(t *testing.T) {
	c := hdfstest.Start(t)
	b, _, _ := retainedOnHDFS(t, c, "c")
	// A newer epoch's file at offset 0 whose first batch is damaged, a valid one after it.
	bad := records(0, -1, "x", 40)
	batch.SetBaseOffset(bad, 0)
	bad[len(bad)/2] ^= 0x40
	good := records(0, -1, "y", 1)
	batch.SetBaseOffset(good, 40)
	conn, err := hdfs.NewConn(hdfs.Options{Addresses: []string{c.Addr}, User: "test", Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hw := hdfs.NewWriter(hdfs.PartitionDir("/sluice", "c", 0), uint64(time.Now().UnixNano()), 0, hdfs.WriterOptions{})
	if err := hw.Commit(context.Background(), conn, [][]byte{bad, good}); err != nil {
		t.Fatal(err)
	}
	// A restarted broker (a newer epoch still) lists HDFS afresh.
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	b.Restart()
	w := dial(t, b.Addr)
	resp := w.call(&wire.FetchRequest{Topic: []byte("c"), Partition: 0, Offset: 0, MaxBytes: 1 << 20})
	if resp.Header.Code != wire.CodeCorruptData {
		t.Fatalf("fetch over a damaged batch on HDFS answered %v %q", resp.Header.Code, resp.Text)
	}
}
