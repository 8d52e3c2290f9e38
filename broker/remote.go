package broker

import (
	"context"
	"errors"
	"sync"

	"sluice/batch"
	"sluice/netio"
	"sluice/persist/hdfs"
	"sluice/wire"
)

// Fetches from HDFS. In distributed mode a fetch of an offset below what a partition
// holds locally (retention removed it here, or the partition was loaded elsewhere
// before) is read from HDFS. Reads run on goroutines of their own (hdfs.workers of
// them, each with its HDFS connection), never on a shard or an event loop: the shard
// hands the fetch over and goes on, and the answer is written when the read returns. The
// blocks read go through the arena's block cache (one budget with the write buffers).

// readersKept bounds the partitions' readers one worker keeps (each lists its files once
// and holds its last two 1 MiB blocks).
const readersKept = 64

// remoteReads is the pool that serves fetches from HDFS.
type remoteReads struct {
	b     *Broker
	tasks chan *fetchTask
	cache hdfs.Cache
	stop  chan struct{}
	wg    sync.WaitGroup
}

// startRemoteReads starts the pool (distributed mode only).
func (b *Broker) startRemoteReads() error {
	if !b.cfg.HDFS.Enabled() {
		return nil
	}
	blocks, err := b.arena.NewBlockCache(0)
	if err != nil {
		return err
	}
	rr := &remoteReads{b: b, tasks: make(chan *fetchTask, 256), stop: make(chan struct{}),
		cache: hdfs.ArenaCache{Blocks: blocks, Size: int(b.arena.Stats().ChunkSize)}}
	opts := b.cfg.HDFS.ShipperOptions.Conn
	opts.Addresses = b.cfg.HDFS.Addresses
	for range max(b.cfg.HDFS.Workers, 1) {
		conn, err := hdfs.NewConn(opts)
		if err != nil {
			close(rr.stop)
			rr.wg.Wait()
			return err
		}
		rr.wg.Add(1)
		go rr.worker(conn)
	}
	b.remote = rr
	return nil
}

// stopRemoteReads stops the pool; reads under way end first (each bounded by the HDFS
// timeout). Fetches still queued are answered not_serving.
func (b *Broker) stopRemoteReads() {
	rr := b.remote
	if rr == nil {
		return
	}
	close(rr.stop)
	rr.wg.Wait()
	for {
		select {
		case t := <-rr.tasks:
			b.respond(t.c, t.slot, t.hdr, wire.NewError(wire.CodeNotServing, "the broker is stopping"), nil)
		default:
			return
		}
	}
}

// submit hands a fetch to the pool; false when its queue is full.
func (rr *remoteReads) submit(t *fetchTask) bool {
	select {
	case rr.tasks <- t:
		return true
	default:
		return false
	}
}

func (rr *remoteReads) worker(conn *hdfs.Conn) {
	defer rr.wg.Done()
	defer conn.Close()
	readers := map[*part]*hdfs.Reader{}
	for {
		select {
		case <-rr.stop:
			return
		case t := <-rr.tasks:
			rr.serve(conn, readers, t)
		}
	}
}

// serve answers t from HDFS: batches from the one holding its offset, or out of range
// with where HDFS's data starts.
func (rr *remoteReads) serve(conn *hdfs.Conn, readers map[*part]*hdfs.Reader, t *fetchTask) {
	b, pt := rr.b, t.pt
	defer b.recoverRequest("fetch from HDFS", pt, t.c, t.slot, t.hdr)
	ctx := context.Background()
	r := readers[pt]
	fresh := r == nil
	if fresh {
		if len(readers) >= readersKept {
			for k := range readers { // any one: a reader holds up to 2 MiB of blocks
				delete(readers, k)
				break
			}
		}
		r = hdfs.NewReader(conn, hdfs.PartitionDir(b.cfg.HDFS.Root, pt.topic.meta.Name, pt.id), rr.cache)
		readers[pt] = r
	}
	var data []byte
	var err error
	for try := 0; try < 2; try++ {
		if fresh || try > 0 { // list again: files roll and new ones appear
			if err = r.Refresh(ctx); err != nil {
				break
			}
		}
		if data, _, err = r.Read(ctx, t.req.Offset, int(max(t.req.MaxBytes, 1))); !errors.Is(err, hdfs.ErrOffsetNotFound) || fresh {
			break
		}
	}
	if err == nil {
		data = below(data, pt.p.LocalStart())
	}
	w := pt.p.Window()
	body := wire.FetchResponse{HighWatermark: w.Next, LogStartOffset: w.Start, Checkpoint: w.Checkpoint}
	if start, ok := r.Start(); ok {
		body.LogStartOffset = min(start, w.Start)
	}
	switch {
	case err == nil:
		rr.b.remoteBytes.Add(uint64(len(data)))
		t.c.Respond(t.slot, netio.Response{Head: body.AppendFrameHeader(nil, t.hdr, len(data)), Iov: [][]byte{data}, File: -1})
	case errors.Is(err, hdfs.ErrOffsetNotFound):
		b.respond(t.c, t.slot, t.hdr, wire.NewError(wire.CodeOffsetOutOfRange, err.Error()), &body)
	case errors.Is(err, hdfs.ErrCorrupt):
		b.cfg.Logger.Error("corrupt data on HDFS: not served", "topic", pt.topic.meta.Name, "partition", pt.id, "err", err)
		b.respond(t.c, t.slot, t.hdr, wire.NewError(wire.CodeCorruptData, err.Error()), nil)
	default: // HDFS down or slow: retriable
		b.respond(t.c, t.slot, t.hdr, wire.NewError(wire.CodeNotServing, "cannot read from HDFS: "+err.Error()), nil)
	}
}

// below returns the whole batches of data (read from HDFS) that start below limit, the
// partition's first local offset. Past it the local log answers, and HDFS may hold an
// older epoch's data there that no reader trusts once this broker's first file fences
// it (a commit of the broker the partition came from, landing after this load read
// HDFS's end): never acknowledged, at offsets this broker gives to other records.
func below(data []byte, limit int64) []byte {
	n := 0
	for n < len(data) {
		h, err := batch.ParseHeader(data[n:])
		if err != nil || h.BaseOffset >= limit {
			break
		}
		n += h.Size()
	}
	return data[:n]
}
