package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

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
func (b *Broker) openLocal(topic string, id int, dir string, opts local.Options) (*local.Log, replicaInfo, error) {
	none := replicaInfo{start: -1}
	if !b.cfg.HDFS.Enabled() {
		l, err := local.Open(dir, opts)
		return l, none, err
	}
	empty := !hasSegments(dir)
	tail, ok, err := b.replicaTail(topic, id)
	switch {
	case err != nil && empty:
		return nil, none, fmt.Errorf("its local directory holds no data and HDFS cannot be read to load it from there: %w", err)
	case err != nil:
		b.cfg.Logger.Warn("cannot read the partition's tail on HDFS: opening from the local disk alone",
			"topic", topic, "partition", id, "err", err)
		l, err := local.Open(dir, opts)
		return l, none, err
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

// replicaInfo is what loading learned of a partition on HDFS: where its copy there
// starts (-1: unknown), and the headers of its last batches (for the producers'
// sequences).
type replicaInfo struct {
	start int64
	prior []batch.Header
}

// replicaTail reads where HDFS's data of a partition ends and the headers of its last
// batches (the dedup horizon's worth).
func (b *Broker) replicaTail(topic string, id int) (hdfs.Tail, bool, error) {
	opts := b.cfg.HDFS.ShipperOptions.Conn
	opts.Addresses = b.cfg.HDFS.Addresses
	conn, err := hdfs.NewConn(opts)
	if err != nil {
		return hdfs.Tail{}, false, err
	}
	defer conn.Close()
	return hdfs.ReadTail(context.Background(), conn, hdfs.PartitionDir(b.cfg.HDFS.Root, topic, id), dedupHorizon)
}

// dedupHorizon is how much of a partition's end is read to rebuild its producers'
// sequences (engine.PartitionConfig.DedupHorizon's default).
const dedupHorizon = 64 << 20

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
