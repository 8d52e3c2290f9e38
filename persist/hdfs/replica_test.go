package hdfs

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"

	"sluice/internal/peer"
	"sluice/internal/peer/hdfstest"
)

// TestAppendMissingAReplica: a commit round is never appended through a pipeline that
// leaves out a replica of the file (pipeline.go says how that lost acknowledged rounds:
// colinmarc/hdfs appends without a new generation stamp). On three DataNodes: a round
// on all three; the third stopped until the NameNode declares it dead; the second
// round must go into a new file, not be appended to the first through the two left,
// and so must the third (the second file has two replicas of three).
// Then a round on that new file is abandoned half-way (its writer gone without a
// close), the third DataNode resumed (it reports its replica of the first file), and
// the lease recovered: every acknowledged offset is still read, once, in order.
func TestAppendMissingAReplica(t *testing.T) {
	httpPort, err := peer.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	nnHTTP := fmt.Sprintf("127.0.0.1:%d", httpPort)
	s := hdfstest.StartSeparateN(t, 3, func(addr string) error { return Probe(addr, 5*time.Second) }, map[string]string{
		"dfs.namenode.http-address": nnHTTP,
		// Every new block on all three DataNodes: by default the NameNode leaves out a
		// DataNode busier than twice the average (as it may on a loaded host).
		"dfs.namenode.redundancy.considerLoad":  "false",
		"dfs.namenode.replication.considerLoad": "false",
		// A stopped DataNode is dead after 2 rechecks and 10 heartbeats: 11 s.
		"dfs.namenode.heartbeat.recheck-interval": "500",
		// Long enough for the resumed DataNode's report to land before the abandoned
		// round's lease is recovered.
		"dfs.namenode.lease-hard-limit-sec": "15",
	})
	conn, err := NewConn(Options{Addresses: []string{s.Addr}, User: "sluice", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	ctx := context.Background()
	dir := PartitionDir("/stale", "topic", 0)
	w := NewWriter(dir, 1, 0, WriterOptions{})

	waitPipeline(t, conn, 3) // the cluster takes writes once one DataNode is in
	first, _ := batches(0, 300, "a")
	commitUntil(t, w, conn, first)
	firstFile := w.file.name
	if got := lastPipeline(conn); got != 3 {
		t.Fatalf("the first round's pipeline had %d DataNodes, want 3", got)
	}
	s.PauseDataNodeAt(2)
	t.Cleanup(func() { s.ResumeDataNodeAt(2) })
	waitLive(t, nnHTTP, 2)
	waitLowRedundancy(t, nnHTTP) // the dead DataNode's replicas dropped from the blocks

	second, _ := batches(w.Next(), 300, "a")
	commitUntil(t, w, conn, second)
	if w.file.name == firstFile || w.PipelineSwitches != 1 {
		t.Fatalf("with a DataNode dead the pipeline check did not move the second round to a new file: it went to %s (the first round's file %s), %d switches",
			w.file.name, firstFile, w.PipelineSwitches)
	}
	// The second file was created on the two DataNodes left: the third round goes to
	// a new file without trying to append to it.
	refused, secondFile := conn.refused.Load(), w.file.name
	third, _ := batches(w.Next(), 300, "a")
	commitUntil(t, w, conn, third)
	acked := w.Next()
	if w.file.name == secondFile || w.PipelineSwitches != 2 || conn.refused.Load() != refused {
		t.Fatalf("the third round went to %s (the second's %s), %d switches, %d appends refused (%d before): want a new file, no append tried",
			w.file.name, secondFile, w.PipelineSwitches, conn.refused.Load(), refused)
	}

	// The abandoned round: an append to the writer's current file, some bytes sent to
	// the DataNodes, and the client gone without a close (its lease is never renewed).
	junk, _ := batches(acked, 50, "a")
	p := path.Join(dir, w.file.name)
	abandon := func(cl *hdfs.Client) error {
		fw, err := cl.Append(p)
		if err != nil {
			return err
		}
		if _, err := fw.Write(junk[:len(junk)/2]); err != nil {
			return err
		}
		return fw.Flush()
	}
	if err := conn.do(ctx, "abandon a round", abandon); err != nil {
		t.Fatal(err)
	}
	conn.Reset()
	s.ResumeDataNodeAt(2)
	waitLive(t, nnHTTP, 3)
	waitClosed(t, conn, p)

	r := NewReader(conn, dir, nil)
	if err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	end, _, err := r.End(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if end < acked {
		t.Fatalf("HDFS ends at offset %d after the lease recovery: the acknowledged offsets %d to %d are lost", end, end, acked)
	}
	readAll(t, r, 0, acked, func(int64) string { return "a" })
}

// waitPipeline writes small files until the NameNode places one on n DataNodes (a
// DataNode it counts live takes blocks only once its first report is in), for at
// most a minute.
func waitPipeline(t *testing.T, conn *Conn, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := conn.do(context.Background(), "probe", func(cl *hdfs.Client) error {
			return writeWhole(cl, "/.sluice-pipeline-probe", []byte{1})
		})
		if err == nil && lastPipeline(conn) == int32(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no file placed on %d DataNodes within a minute (last %d, %v)", n, lastPipeline(conn), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitLive polls the NameNode's JMX until it counts n live DataNodes, for at most a
// minute.
func waitLive(t *testing.T, nnHTTP string, n int) {
	t.Helper()
	url := "http://" + nnHTTP + "/jmx?qry=Hadoop:service=NameNode,name=FSNamesystemState"
	deadline := time.Now().Add(time.Minute)
	live := -1
	for time.Now().Before(deadline) {
		if live = liveDataNodes(url); live == n {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("the NameNode counts %d live DataNodes after a minute, want %d", live, n)
}

// liveDataNodes returns the NameNode's count of live DataNodes, -1 when it cannot be read.
func liveDataNodes(url string) int {
	return jmxInt(url, "NumLiveDataNodes")
}

// waitLowRedundancy polls the NameNode's JMX until it counts a block with fewer
// replicas than it should have (a dead DataNode's replicas are dropped from the
// blocks a moment after the DataNode is counted dead), for at most a minute.
func waitLowRedundancy(t *testing.T, nnHTTP string) {
	t.Helper()
	url := "http://" + nnHTTP + "/jmx?qry=Hadoop:service=NameNode,name=FSNamesystem"
	deadline := time.Now().Add(time.Minute)
	for jmxInt(url, "LowRedundancyBlocks") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the NameNode counts no block with too few replicas a minute after a DataNode died")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// jmxInt returns the attribute of the one bean url answers, -1 when it cannot be read.
func jmxInt(url, attr string) int {
	resp, err := http.Get(url)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var out struct {
		Beans []map[string]any
	}
	if json.NewDecoder(resp.Body).Decode(&out) != nil || len(out.Beans) != 1 {
		return -1
	}
	v, ok := out.Beans[0][attr].(float64)
	if !ok {
		return -1
	}
	return int(v)
}

// waitClosed waits until the file at p is closed (its lease recovered): an append
// succeeds, and is closed at once without data. At most a minute.
func waitClosed(t *testing.T, conn *Conn, p string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := conn.do(context.Background(), "append to "+p, func(cl *hdfs.Client) error {
			fw, err := cl.Append(p)
			if err != nil {
				return err
			}
			return closeFile(fw)
		})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still open after a minute: %v", p, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
