package test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sluice/batch"
	"sluice/internal/testbroker"
	"sluice/wire"
)

// dataEntries lists the names in a data directory, but the broker's lock file.
func dataEntries(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if e.Name() != "+lock" {
			names = append(names, e.Name())
		}
	}
	return names
}

// TestCreateRefusedLeavesNothing: options out of bounds are refused with invalid_config
// and a one-line text before anything touches the disk, so the broker restarts cleanly.
// (Each used to leave a directory that made the next start fail.)
func TestCreateRefusedLeavesNothing(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	w := dial(t, b.Addr)
	for name, req := range map[string]*wire.CreateTopicRequest{
		"segment bytes 100":   {Name: "a", Partitions: 1, Options: wire.TopicOptions{SegmentBytes: 100}},
		"segment bytes 2TiB":  {Name: "b", Partitions: 1, Options: wire.TopicOptions{SegmentBytes: 2 << 40}},
		"segment ms 9.3e12":   {Name: "c", Partitions: 1, Options: wire.TopicOptions{SegmentMs: 9_300_000_000_000}},
		"retention ms 9.3e12": {Name: "d", Partitions: 1, Options: wire.TopicOptions{RetentionMs: 9_300_000_000_000}},
		"65536 partitions":    {Name: "e", Partitions: wire.MaxPartitions},
	} {
		r := w.call(req)
		if r.Header.Code != wire.CodeInvalidConfig || strings.Contains(r.Text, "\n") || r.Text == "" {
			t.Fatalf("%s: answered %v %q, want invalid_config on one line", name, r.Header.Code, r.Text)
		}
	}
	if got := dataEntries(t, b.Dir); len(got) != 0 {
		t.Fatalf("refused creations left %v", got)
	}
	b.Stop()
	b.Restart()
	createTopic(t, dial(t, b.Addr), "ok", 1)
}

// TestStartSkipsWhatIsNotATopic: what an interrupted creation left is removed, and a
// directory that is not a readable topic is skipped and reported: neither stops the
// broker, and the real topics serve.
func TestStartSkipsWhatIsNotATopic(t *testing.T) {
	b := testbroker.Start(t, t.TempDir(), "-metrics", "127.0.0.1:0")
	w := dial(t, b.Addr)
	createTopic(t, w, "real", 2)
	mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("real"), Version: 1, Batches: records(0, -1, "r", 3)}))
	b.Stop()
	for dir, meta := range map[string]string{
		"+creating.half.123": `{"name":"half","version":1,"partitions":1}`,
		"nometa":             "",
		"garbage":            "{not json",
		"wrongname":          `{"name":"other","version":1,"partitions":1}`,
		// A layout history edited by hand: its last layout is not the topic's.
		"badhistory": `{"name":"badhistory","version":2,"partitions":4,"history":[{"version":1,"partitions":2},{"version":2,"partitions":3}]}`,
	} {
		if err := os.MkdirAll(filepath.Join(b.Dir, dir, "0"), 0o755); err != nil {
			t.Fatal(err)
		}
		if meta != "" {
			if err := os.WriteFile(filepath.Join(b.Dir, dir, "topic.json"), []byte(meta), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	b.Restart()
	w = dial(t, b.Addr)
	if got := fetchValues(t, w, "real", 0, 0); len(got) != 3 {
		t.Fatalf("real topic after the restart: %v", got)
	}
	if _, err := os.Stat(filepath.Join(b.Dir, "+creating.half.123")); !os.IsNotExist(err) {
		t.Fatalf("an interrupted creation was not removed: %v", err)
	}
	if got := scrape(t, b.MetricsAddr, "sluice_data_dir_skipped"); got != 4 {
		t.Fatalf("skipped %v directories, want 4", got)
	}
	if !strings.Contains(b.Log(), "skipping a directory that is not a readable topic") {
		t.Fatalf("the skipped directories were not reported:\n%s", b.Log())
	}
}

// TestKillDuringCreation kills the broker at varying moments of a topic creation: every
// restart succeeds, and the topic is either whole or absent, never half made.
func TestKillDuringCreation(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	for i, delay := range []time.Duration{0, time.Millisecond, 3 * time.Millisecond, 10 * time.Millisecond, 30 * time.Millisecond} {
		name := fmt.Sprintf("t%d", i)
		w := dial(t, b.Addr)
		w.send(&wire.CreateTopicRequest{Name: name, Partitions: 300})
		time.Sleep(delay) // a varying moment of the creation, not a wait for readiness
		b.Kill()
		b.Restart()
		r := dial(t, b.Addr).call(&wire.DescribeTopicRequest{Name: name})
		switch r.Header.Code {
		case wire.CodeUnknownTopic:
		case wire.CodeNone:
			if n := len(r.Body.(*wire.DescribeTopicResponse).Partitions); n != 300 {
				t.Fatalf("kill after %v: topic with %d partitions, want 300", delay, n)
			}
		default:
			t.Fatalf("kill after %v: describe answered %v %q", delay, r.Header.Code, r.Text)
		}
		for _, e := range dataEntries(t, b.Dir) {
			if strings.HasPrefix(e, "+creating") {
				t.Fatalf("kill after %v: %s left after the restart", delay, e)
			}
		}
	}
}

// TestMetadataAlwaysHasAnAddress: requests that reach a starting broker as early as
// possible never get metadata with an empty address (3 of 160 restarts did, and a
// consumer then retried "missing address" forever). The broker learns its address
// before it accepts a connection.
func TestMetadataAlwaysHasAnAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	b := testbroker.Start(t, dir)
	createTopic(t, dial(t, b.Addr), "m", 1)
	b.Stop()
	b.Addr = addr // restarts listen here, so the prober knows where to knock
	for range 10 {
		answers := make(chan string, 1)
		stop := make(chan struct{})
		go probeMetadata(addr, stop, answers)
		b.Restart()
		close(stop)
		if got := <-answers; got != "" {
			t.Fatal(got)
		}
		b.Stop()
	}
}

// probeMetadata connects and asks for metadata as fast as it can until stop, and
// reports the first answer whose address is empty ("" when none was).
func probeMetadata(addr string, stop chan struct{}, report chan<- string) {
	req := wire.Request{Header: wire.RequestHeader{APIKey: wire.APIMetadata, RequestID: 1}, Body: &wire.MetadataRequest{}}
	frame := req.AppendTo(nil)
	for {
		select {
		case <-stop:
			report <- ""
			return
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			continue
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Write(frame)
		buf := make([]byte, 1<<16)
		n, _ := c.Read(buf)
		c.Close()
		if n > 4 && bytes.Contains(buf[:n], []byte("m")) {
			var resp wire.Response
			if _, err := resp.Decode(buf[:n], wire.DefaultMaxFrame); err == nil {
				for _, tp := range resp.Body.(*wire.MetadataResponse).Topics {
					for _, p := range tp.Partitions {
						if p.Addr == "" {
							report <- "metadata served with an empty address"
							return
						}
					}
				}
			}
		}
	}
}

// TestDamagedPartitionServesTheOthers: a bad batch header in the newest data of one
// partition (where its producers' sequences are read back at load) used to stop the
// whole broker. Now that partition loads damaged — it serves what precedes the damage,
// refuses reads at it with corrupt_data and takes no writes — and reports it in the log
// and /metrics, while the other partitions serve as usual.
func TestDamagedPartitionServesTheOthers(t *testing.T) {
	b := testbroker.Start(t, t.TempDir(), "-metrics", "127.0.0.1:0")
	w := dial(t, b.Addr)
	mustOK(t, w.call(&wire.CreateTopicRequest{Name: "dmg", Partitions: 2, Options: wire.TopicOptions{SegmentBytes: 64 << 10}}))
	value := strings.Repeat("v", 1000)
	for part := range uint32(2) {
		for seq := range int32(20) {
			mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("dmg"), Partition: part, Version: 1, ProducerID: 9,
				Batches: records(9, seq*10, value, 10)}))
		}
	}
	b.Stop()
	// Flip the magic byte of the third batch of partition 0's first (sealed) segment.
	seg := filepath.Join(b.Dir, "dmg", "0", "00000000000000000000.log")
	raw, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	pos := 0
	for range 2 {
		pos += 12 + int(uint32(raw[pos+8])|uint32(raw[pos+9])<<8|uint32(raw[pos+10])<<16|uint32(raw[pos+11])<<24)
	}
	raw[pos+16] ^= 0xff
	if err := os.WriteFile(seg, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	b.Restart()
	w = dial(t, b.Addr)
	// The healthy partition serves and takes writes.
	mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("dmg"), Partition: 1, Version: 1, ProducerID: 9,
		Batches: records(9, 200, "more", 1)}))
	// The damaged one refuses writes, serves up to the damage, and refuses at it.
	r := w.call(&wire.ProduceRequest{Topic: []byte("dmg"), Version: 1, ProducerID: 9, Batches: records(9, 200, "x", 1)})
	if r.Header.Code != wire.CodeCorruptData {
		t.Fatalf("produce to a damaged partition answered %v %q", r.Header.Code, r.Text)
	}
	ok := w.call(&wire.FetchRequest{Topic: []byte("dmg"), Offset: 0, MaxBytes: 1})
	mustOK(t, ok)
	if got := lastOffset(t, ok.Body.(*wire.FetchResponse).Records); got != 9 {
		t.Fatalf("first batch before the damage ends at %d, want 9", got)
	}
	bad := w.call(&wire.FetchRequest{Topic: []byte("dmg"), Offset: 20, MaxBytes: 1 << 20})
	if bad.Header.Code != wire.CodeCorruptData || !strings.Contains(bad.Text, "00000000000000000000.log") {
		t.Fatalf("fetch at the damage answered %v %q", bad.Header.Code, bad.Text)
	}
	if got := scrape(t, b.MetricsAddr, `sluice_partition_state{partition="0",state="damaged",topic="dmg"}`); got != 1 {
		t.Fatalf("damaged state metric %v", got)
	}
	if got := scrape(t, b.MetricsAddr, `sluice_partition_state{partition="1",state="serving",topic="dmg"}`); got != 1 {
		t.Fatalf("serving state metric %v", got)
	}
	if !strings.Contains(b.Log(), "sluice segment repair") {
		t.Fatalf("the log does not say how to repair:\n%s", b.Log())
	}
}

// TestDamagedTailAnswersAtOnce: one flipped bit in the last segment after a clean stop is
// damage (the recovery point covers it), not a torn tail: nothing is cut, the records
// before it are served, and a long poll at the damage is answered corrupt_data at once
// instead of waiting for data that cannot come.
func TestDamagedTailAnswersAtOnce(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	w := dial(t, b.Addr)
	createTopic(t, w, "tail", 1)
	for i := range 20 {
		mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("tail"), Version: 1, Batches: records(0, -1, fmt.Sprint(i), 25)}))
	}
	b.Stop()
	seg := filepath.Join(b.Dir, "tail", "0", "00000000000000000000.log")
	raw, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	raw[dataEnd(t, raw)/2] ^= 0x10 // in the middle of the data (the file is preallocated)
	if err := os.WriteFile(seg, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	b.Restart()
	w = dial(t, b.Addr)
	d := w.call(&wire.DescribeTopicRequest{Name: "tail"})
	mustOK(t, d)
	damage := d.Body.(*wire.DescribeTopicResponse).Partitions[0].NextOffset
	if damage <= 0 || damage >= 500 {
		t.Fatalf("partition ends at %d after a bit flip in the middle of 500 records", damage)
	}
	if got := fetchValuesUpTo(t, w, "tail", damage); len(got) != int(damage) {
		t.Fatalf("read %d records before the damage at %d", len(got), damage)
	}
	r := w.call(&wire.FetchRequest{Topic: []byte("tail"), Offset: damage, MaxBytes: 1 << 20, MaxWaitMs: 60_000})
	if r.Header.Code != wire.CodeCorruptData {
		t.Fatalf("long poll at the damage answered %v %q", r.Header.Code, r.Text)
	}
	b.Stop()
	if after, err := os.ReadFile(seg); err != nil || !bytes.Equal(after, raw) {
		t.Fatalf("the damaged segment was changed (%v): nothing may be cut without the operator", err)
	}
}

// dataEnd returns where the batches of a segment file's image end: segment files are
// preallocated, and the data is followed by zeros.
func dataEnd(t testing.TB, raw []byte) int {
	t.Helper()
	pos := 0
	for pos+batch.HeaderSize <= len(raw) {
		h, err := batch.ParseHeader(raw[pos:])
		if err != nil {
			break
		}
		pos += h.Size()
	}
	if pos == 0 {
		t.Fatal("no batch in the segment")
	}
	return pos
}

// fetchValuesUpTo reads a partition from 0 to end (exclusive) and returns the values.
func fetchValuesUpTo(t testing.TB, w *wireConn, topic string, end int64) []string {
	t.Helper()
	var vals []string
	for off := int64(0); off < end; {
		resp := w.call(&wire.FetchRequest{Topic: []byte(topic), Offset: off, MaxBytes: 1 << 20})
		mustOK(t, resp)
		recs := resp.Body.(*wire.FetchResponse).Records
		if len(recs) == 0 {
			t.Fatalf("empty fetch at %d below %d", off, end)
		}
		last := lastOffset(t, recs)
		for i := off; i <= last; i++ {
			vals = append(vals, fmt.Sprint(i))
		}
		off = last + 1
	}
	return vals
}

// TestOneBrokerPerDataDirectory: a second broker on a data directory in use refuses to
// start before it reads anything (it used to recover the partitions, removing the first
// broker's temporary files, which failed a live partition), and `segment repair` refuses
// to cut a partition while the broker runs. A topic whose name looks like a creation
// leftover is a topic like any other.
func TestOneBrokerPerDataDirectory(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	w := dial(t, b.Addr)
	createTopic(t, w, ".creating.orders", 1)
	mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte(".creating.orders"), Version: 1, Batches: records(0, -1, "o", 2)}))

	second := exec.Command(testbroker.Binary(t), "broker", "--data", b.Dir, "--listen", "127.0.0.1:0")
	out, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "locked by another process") {
		t.Fatalf("a second broker on the same directory: %v\n%s", err, out)
	}
	repair := exec.Command(testbroker.Binary(t), "segment", "repair", filepath.Join(b.Dir, ".creating.orders", "0"), "--truncate-at", "0")
	if out, err := repair.CombinedOutput(); err == nil || !strings.Contains(string(out), "stop the broker first") {
		t.Fatalf("repair under a running broker: %v\n%s", err, out)
	}
	mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte(".creating.orders"), Version: 1, Batches: records(0, -1, "p", 1)}))
	b.Stop()
	b.Restart()
	if got := fetchValues(t, dial(t, b.Addr), ".creating.orders", 0, 0); strings.Join(got, ",") != "o-0,o-1,p-0" {
		t.Fatalf("after a restart: %v", got)
	}
}

// TestSealedSegmentDamageAboveRecoveryPoint: acknowledged data in a sealed segment above
// the recovery point (which is written at most every 30 s, so it lags), with one byte
// flipped between a kill -9 and a start. It used to be taken for a torn tail: the
// segment was cut and every later one deleted, 1500 acknowledged records lost, the
// partition "serving". A segment with a successor cannot have a torn tail (a roll makes it
// whole first): the partition opens damaged and nothing is deleted.
func TestSealedSegmentDamageAboveRecoveryPoint(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	w := dial(t, b.Addr)
	mustOK(t, w.call(&wire.CreateTopicRequest{Name: "t", Partitions: 1, Options: wire.TopicOptions{SegmentBytes: 8192}}))
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("t"), Version: 1, WaitDurableMs: 30_000,
				Batches: records(0, -1, fmt.Sprint(i), 100)}))
		}
	}
	produce(0, 5)
	b.Kill()
	b.Restart() // recovery records the recovered end as the recovery point: 499
	w = dial(t, b.Addr)
	produce(5, 30)
	b.Kill()
	part := filepath.Join(b.Dir, "t", "0")
	segs, _ := filepath.Glob(filepath.Join(part, "*.log"))
	if len(segs) < 4 {
		t.Fatalf("%d segments", len(segs))
	}
	victim := segs[len(segs)-3] // sealed, above the recovery point, two segments after it
	raw, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0xff
	if err := os.WriteFile(victim, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	b.Restart()
	after, _ := filepath.Glob(filepath.Join(part, "*.log"))
	if len(after) != len(segs) {
		t.Fatalf("%d segments after the start, %d before: acknowledged data deleted", len(after), len(segs))
	}
	r := dial(t, b.Addr).call(&wire.ProduceRequest{Topic: []byte("t"), Version: 1, Batches: records(0, -1, "x", 1)})
	if r.Header.Code != wire.CodeCorruptData {
		t.Fatalf("produce after damage in a sealed segment answered %v %q, want corrupt_data", r.Header.Code, r.Text)
	}
}
