package test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sluice/client"
	"sluice/internal/testbroker"
	"sluice/wire"
)

// TestStalledConsumerReleasesDeletedSegments: a consumer that asks for records held only
// in segment files and then never reads pins those files through its answers (a sendfile
// answer keeps its file open until written). Once retention deletes them, their disk space
// stays taken for as long as the consumer keeps its connection, which was for ever: on a
// full disk, one stuck consumer kept the space retention freed. net.send_timeout closes
// the connection once its socket has taken nothing for that long, and the space goes
// with it: the broker then holds no deleted file of the partition.
func TestStalledConsumerReleasesDeletedSegments(t *testing.T) {
	const sendTimeout = 8 * time.Second // long enough to see the files held first
	b := testbroker.Start(t, t.TempDir(), "-metrics", "127.0.0.1:0", "-arena.partition_max", "4MiB",
		"-broker.retention_check", "100ms", "-net.send_timeout", sendTimeout.String())
	w := dial(t, b.Addr)
	mustOK(t, w.call(&wire.CreateTopicRequest{Name: "st", Partitions: 1,
		Options: wire.TopicOptions{RetentionMs: -1, RetentionBytes: 12 << 20, SegmentBytes: 1 << 20, SegmentMs: -1}}))
	var req []byte
	for len(req) < 1<<20 {
		req = append(req, records(0, -1, string(make([]byte, 1000)), 63)...)
	}
	produce := func(mib int) {
		for range mib {
			produceRetrying(t, w, &wire.ProduceRequest{Topic: []byte("st"), Version: 1, Batches: req})
		}
	}
	produce(12) // 12 segments, the older ones out of the 4 MiB the partition keeps in memory
	earliest := func() int64 {
		resp := w.call(&wire.ListOffsetsRequest{Topic: []byte("st"), Partition: 0, Timestamp: wire.TimestampEarliest})
		mustOK(t, resp)
		return resp.Body.(*wire.ListOffsetsResponse).Offset
	}
	from := earliest()

	// The stalled consumer: fetches of the oldest 6 MiB, a MiB each, never read. The
	// first few fill its socket; the rest wait, each holding its segment's file.
	stalled := dial(t, b.Addr)
	const perMiB = 16 * 63
	for i := range 6 {
		stalled.send(&wire.FetchRequest{Topic: []byte("st"), Offset: from + int64(i*perMiB), MaxBytes: 1 << 20})
	}
	produce(16) // retention deletes every segment the stalled answers read
	pollFor(t, "retention to delete the stalled consumer's segments", func() bool { return earliest() > from+6*perMiB })
	dataDir := filepath.Join(b.Dir, "st")
	heldDeleted := func() []string { return deletedFilesHeld(t, b.Pid(), dataDir) }
	pollFor(t, "the removed segments' files to show as held by the stalled answers", func() bool { return len(heldDeleted()) > 0 })
	if n := scrape(t, b.MetricsAddr, "sluice_net_sends_timed_out_total"); n != 0 {
		t.Fatalf("a connection was closed for its send timeout before the stalled consumer's %v passed: %v", sendTimeout, n)
	}
	held := heldDeleted()
	start := time.Now()
	pollFor(t, "the stalled consumer's connection to be closed", func() bool {
		return scrape(t, b.MetricsAddr, "sluice_net_sends_timed_out_total") == 1
	})
	pollFor(t, "the deleted segments' files to be released", func() bool { return len(heldDeleted()) == 0 })
	t.Logf("%d deleted files held by the stalled consumer's answers, released %v after (send timeout %v)",
		len(held), time.Since(start).Round(time.Millisecond), sendTimeout)

	// The broker serves on: a consumer that reads gets the partition's records.
	resp := w.call(&wire.FetchRequest{Topic: []byte("st"), Offset: earliest(), MaxBytes: 1 << 20})
	mustOK(t, resp)
	if len(resp.Body.(*wire.FetchResponse).Records) == 0 {
		t.Fatal("a reading consumer got no records after the stalled one was closed")
	}
}

// deletedFilesHeld lists the files under dir that process pid holds open although they
// were removed (their /proc/PID/fd links end in " (deleted)").
func deletedFilesHeld(t *testing.T, pid int, dir string) []string {
	t.Helper()
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(fdDir)
	if err != nil {
		t.Fatalf("cannot list the broker's open files: %v", err)
	}
	var held []string
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(fdDir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if strings.HasPrefix(target, dir+string(filepath.Separator)) && strings.HasSuffix(target, " (deleted)") {
			held = append(held, target)
		}
	}
	return held
}

// TestConsumerPausedPastSendTimeout: an application that stops polling for three times
// the broker's net.send_timeout, while records keep coming, keeps its connection: the
// consumer asks for an answer only when it has a buffer for it (client/fetcher.go), so a
// paused fetcher stops asking, and the answers it asked for fit in the sockets; the
// broker never waits on its socket, and the timeout, meant for clients that ask without
// reading, does not fire. Then every record comes exactly once, in offset order.
func TestConsumerPausedPastSendTimeout(t *testing.T) {
	b := testbroker.Start(t, t.TempDir(), "-metrics", "127.0.0.1:0", "-net.send_timeout", "1s")
	for _, parts := range []int{1, 4} {
		t.Run(fmt.Sprintf("%d partitions", parts), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			topic := fmt.Sprintf("pause%d", parts)
			w := dial(t, b.Addr)
			createTopic(t, w, topic, parts)
			p, err := client.NewProducer(ctx, topic, client.Brokers(b.Addr), client.Linger(time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(ctx)
			const n = 40_000 // 40 MB: far more than the consumer's buffers and the sockets'
			val := make([]byte, 1000)
			produced := 0
			produce := func(k int) {
				for range k {
					binary.LittleEndian.PutUint64(val, uint64(produced))
					produced++
					if err := p.Produce(ctx, &client.Record{Key: val[:8], Value: val}); err != nil {
						t.Fatal(err)
					}
				}
				if err := p.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			cs, err := client.NewConsumer(ctx, topic, client.Brokers(b.Addr), client.Start(client.Oldest()),
				client.RetryBackoff(10*time.Millisecond, 200*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			seen := make([]int, n)
			next := map[int]int64{}
			read := 0
			take := func() {
				for cs.Next() {
					r := cs.Record()
					if want := next[cs.Partition()]; r.Offset != want {
						t.Fatalf("partition %d: offset %d delivered, want %d", cs.Partition(), r.Offset, want)
					}
					next[cs.Partition()] = r.Offset + 1
					seen[binary.LittleEndian.Uint64(r.Value)]++
					read++
				}
				if err := cs.Err(); err != nil {
					t.Fatal(err)
				}
			}
			before := scrape(t, b.MetricsAddr, "sluice_net_sends_timed_out_total")
			produce(n / 2)
			if err := cs.Poll(ctx); err != nil {
				t.Fatal(err)
			}
			take()
			produce(n / 2)
			time.Sleep(3 * time.Second) // the application pauses
			if got := scrape(t, b.MetricsAddr, "sluice_net_sends_timed_out_total"); got != before {
				t.Fatalf("the broker closed %v connections for their send timeout while the consumer paused", got-before)
			}
			for read < n {
				if err := cs.Poll(ctx); err != nil {
					t.Fatalf("after %d of %d records: %v", read, n, err)
				}
				take()
			}
			for id, k := range seen {
				if k != 1 {
					t.Fatalf("record %d delivered %d times, want once", id, k)
				}
			}
		})
	}
}
