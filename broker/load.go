package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"sluice/batch"
	"sluice/persist/hdfs"
	"sluice/persist/local"
)

// openLocal opens a partition's local log. In distributed mode HDFS comes first: a
// partition whose local directory is empty (a new host) or ends below HDFS's end (this
// host lost the end of its log after shipping it) continues after HDFS's last batch:
// its local log starts there (an older local log is removed: everything it held below
// HDFS's end is on HDFS, and whatever it held that HDFS does not was never in C, never
// acknowledged as persisted), older offsets are read from HDFS, and the producers'
// sequences are rebuilt from HDFS's tail (prior). When HDFS cannot be read, a partition
// with local data opens from it alone (logged; shipping resumes where HDFS ends once it
// answers); one without local data is not opened: starting it at offset 0 would give
// new data offsets HDFS already holds.
func (b *Broker) openLocal(topic string, id int, dir string, opts local.Options, tr tailRead) (*local.Log, replicaInfo, error) {
	none := replicaInfo{start: -1}
	if !b.cfg.HDFS.Enabled() {
		l, err := local.Open(dir, opts)
		return l, none, err
	}
	empty := !hasSegments(dir)
	tail, ok, err := tr.tail, tr.ok, tr.err
	if err != nil {
		if empty {
			return nil, none, fmt.Errorf("its local directory holds no data and %w: %w", errHDFSUnreadable, err)
		}
		l, lerr := local.Open(dir, opts)
		if lerr != nil {
			return nil, none, lerr
		}
		if start, next := l.Bounds(); start == next { // segments, but not a batch
			l.Close()
			return nil, none, fmt.Errorf("its local log holds no data and %w: %w", errHDFSUnreadable, err)
		}
		b.cfg.Logger.Warn("cannot read the partition's tail on HDFS: opening from the local disk alone",
			"topic", topic, "partition", id, "err", err)
		return l, none, nil
	}
	if ok {
		opts.InitialOffset = tail.End // used when the directory holds no segment
	}
	l, err := local.Open(dir, opts)
	if err != nil {
		return nil, none, err
	}
	start, _ := l.Bounds()
	if !ok || tail.End < start {
		// HDFS holds nothing of it, or nothing joining the local data: shipping starts at
		// the local start, which is then where HDFS's copy begins.
		return l, replicaInfo{start: start}, nil
	}
	if _, next := l.Bounds(); next < tail.End {
		b.cfg.Logger.Warn("the local log ends below HDFS: continuing after HDFS's last batch, older offsets served from HDFS",
			"topic", topic, "partition", id, "local_next", next, "hdfs_end", tail.End)
		if err := l.Close(); err != nil {
			return nil, none, err
		}
		if err := os.RemoveAll(dir); err != nil {
			return nil, none, fmt.Errorf("cannot remove the local log behind HDFS: %w", err)
		}
		if l, err = local.Open(dir, opts); err != nil {
			return nil, none, err
		}
	}
	if empty {
		b.cfg.Logger.Info("loaded from HDFS", "topic", topic, "partition", id, "hdfs_start", tail.Start,
			"next", tail.End, "batches_for_dedup", len(tail.Headers))
	}
	return l, replicaInfo{start: tail.Start, prior: tail.Headers}, nil
}

// errHDFSUnreadable is why a partition with no local data is not opened while HDFS
// cannot be read; such a partition is opened again once it can (reopenLoop).
var errHDFSUnreadable = errors.New("HDFS cannot be read to load it from there")

// replicaInfo is what loading learned of a partition on HDFS: where its copy there
// starts (-1: unknown), and the headers of its last batches (for the producers'
// sequences).
type replicaInfo struct {
	start int64
	prior []batch.Header
}

// tailRead is what reading a partition's tail on HDFS gave.
type tailRead struct {
	tail hdfs.Tail
	ok   bool // HDFS holds some of the partition
	err  error
}

// tailReaders bounds how many partitions' tails are read from HDFS at once at load.
const tailReaders = 8

// replicaTails reads where HDFS's data of each of a topic's partitions ends and the
// headers of its last batches (the dedup horizon's worth), several partitions at once.
// A NameNode that does not answer a first call makes every read fail at once, so a
// broker starting (or a topic created) while HDFS is down waits one timeout, not one
// per partition. Nil outside distributed mode.
func (b *Broker) replicaTails(topic string, partitions int) []tailRead {
	if !b.cfg.HDFS.Enabled() {
		return make([]tailRead, partitions)
	}
	opts := b.cfg.HDFS.ShipperOptions.Conn
	opts.Addresses = b.cfg.HDFS.Addresses
	out := make([]tailRead, partitions)
	probe, err := hdfs.NewConn(opts)
	if err == nil {
		err = probe.Ping(context.Background())
		probe.Close()
	}
	if err != nil {
		for i := range out {
			out[i].err = err
		}
		return out
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, tailReaders)
	for i := range out {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i] = b.readTail(topic, i)
		}()
	}
	wg.Wait()
	return out
}

// readTail reads one partition's tail on HDFS (replicaTails).
func (b *Broker) readTail(topic string, id int) tailRead {
	opts := b.cfg.HDFS.ShipperOptions.Conn
	opts.Addresses = b.cfg.HDFS.Addresses
	conn, err := hdfs.NewConn(opts)
	if err != nil {
		return tailRead{err: err}
	}
	defer conn.Close()
	var tr tailRead
	tr.tail, tr.ok, tr.err = hdfs.ReadTail(context.Background(), conn, hdfs.PartitionDir(b.cfg.HDFS.Root, topic, id), b.cfg.DedupHorizon)
	return tr
}

// hasSegments reports whether dir holds a segment file (a missing directory holds none).
func hasSegments(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) // unreadable: let local.Open say why
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			return true
		}
	}
	return false
}
