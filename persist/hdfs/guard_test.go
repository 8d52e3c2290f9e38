package hdfs

import (
	"context"
	"errors"
	"path"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"
)

// TestAbandonedRoundKeepsTheCheck: a round that Conn.do abandoned (a timeout) goes on
// alone and ends while the next round runs on the same Conn; its end must not switch
// off, or change, the check of that next round's append pipeline. The shared cluster has
// one DataNode and the file has replication 2: every append to it must be refused, while
// abandoned rounds (on the client the Conn dropped) start and end without pause.
func TestAbandonedRoundKeepsTheCheck(t *testing.T) {
	conn, dir := newConn(t, 10*time.Second)
	ctx := context.Background()
	data, _ := batches(0, 20, "a")
	p := path.Join(dir, "short")
	err := conn.do(ctx, "create", func(cl *hdfs.Client) error {
		if err := cl.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		fw, err := cl.CreateFile(p, 2, 128<<20, 0o644)
		if err != nil {
			return err
		}
		return writePieces(fw, [][]byte{data}, time.Now().Add(10*time.Second))
	})
	if err != nil {
		t.Fatal(err)
	}

	old, oldGuard, err := conn.client()
	if err != nil {
		t.Fatal(err)
	}
	conn.Reset() // old's calls are abandoned ones now
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			appendRound(old, oldGuard, p, 1, [][]byte{data}, time.Now().Add(time.Second))
		}
	}()
	err = conn.doGuarded(ctx, "append", func(cl *hdfs.Client, g *pipelineGuard) error {
		return appendRound(cl, g, p, 2, [][]byte{data}, time.Now().Add(10*time.Second))
	})
	stop.Store(true)
	wg.Wait()
	if !errors.Is(err, errPipelineMismatch) {
		t.Fatalf("an append through 1 DataNode to a file of 2 replicas returned %v, want %v", err, errPipelineMismatch)
	}
	var size int64
	if err := conn.do(ctx, "stat", func(cl *hdfs.Client) error {
		fi, err := cl.Stat(p)
		if err == nil {
			size = fi.Size()
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if size != int64(len(data)) {
		t.Fatalf("the file holds %d bytes after the refused appends, want %d", size, len(data))
	}
}

// lastPipeline returns the DataNodes of the last write pipeline the current client of
// conn set up (0: none).
func lastPipeline(conn *Conn) int32 {
	conn.mu.Lock()
	defer conn.mu.Unlock()
	if conn.mu.gen == nil {
		return 0
	}
	return conn.mu.gen.guard.seen.Load()
}
