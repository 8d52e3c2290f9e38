package hdfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"time"

	"github.com/colinmarc/hdfs/v2"
)

// WriterOptions shape a partition's files on HDFS.
type WriterOptions struct {
	// RollBytes seals a file once it holds this many bytes; the next commit starts a
	// new one. Default 128 MiB (one HDFS block).
	RollBytes int64
	// IndexInterval is the data between two entries of a sealed file's index. Default
	// 1 MiB.
	IndexInterval int64
}

func (o *WriterOptions) ensureDefaults() {
	if o.RollBytes <= 0 {
		o.RollBytes = 128 << 20
	}
	if o.IndexInterval <= 0 {
		o.IndexInterval = 1 << 20
	}
}

// Writer ships one partition's batches to HDFS in commit rounds (see the package
// comment). It is used by one goroutine at a time (the shipper's worker that has the
// partition), with any Conn.
type Writer struct {
	dir   string
	epoch uint64
	opts  WriterOptions
	next  int64     // the first offset not acknowledged
	file  *dataFile // the file commits append to; nil: the next commit creates one
	made  bool      // dir is known to exist
	// unindexed is a sealed file whose index could not be written yet: each commit
	// tries again first (readers do without an index meanwhile, by scanning).
	unindexed *dataFile
}

// dataFile is what the writer knows of the file it appends to: what was acknowledged.
type dataFile struct {
	name    string
	base    int64
	size    int64
	next    int64
	entries []indexEntry
}

// NewWriter returns a writer of the partition whose files are in dir (PartitionDir),
// for the given epoch, whose next batch to ship has offset next (everything below is on
// HDFS already, or never will be). Its first commit starts a new file: a writer never
// appends to a file it did not create.
func NewWriter(dir string, epoch uint64, next int64, opts WriterOptions) *Writer {
	opts.ensureDefaults()
	return &Writer{dir: dir, epoch: epoch, next: next, opts: opts}
}

// Next returns the first offset not acknowledged by HDFS: every batch below it is in a
// closed file.
func (w *Writer) Next() int64 { return w.next }

// Commit ships pieces, whole batches back to back from offset Next() on (cut anywhere
// into pieces), and returns once HDFS acknowledged them (the file's Close returned):
// then Next is past them. On an error nothing of them counts as acknowledged: the file is
// abandoned, conn is reset, and the next commit ships them again into a new file. pieces
// are read until Commit returns, and after a timeout possibly a moment longer by the
// abandoned call (whose bytes no reader trusts): they must stay mapped, not unchanged.
func (w *Writer) Commit(ctx context.Context, conn *Conn, pieces [][]byte) error {
	if f := w.unindexed; f != nil {
		if w.writeIndex(ctx, conn, f) == nil {
			w.unindexed = nil
		}
	}
	f := w.file
	if f == nil {
		f = &dataFile{name: fileName(w.next, w.epoch), base: w.next}
	}
	var entries []indexEntry
	last := int64(-1)
	if n := len(f.entries); n > 0 {
		last = f.entries[n-1].pos
	}
	next, n, err := walkBatches(pieces, w.next, func(pos, base int64) {
		pos += f.size
		if last < 0 || pos-last >= w.opts.IndexInterval {
			entries = append(entries, indexEntry{base, pos})
			last = pos
		}
	})
	if err != nil {
		return fmt.Errorf("hdfs: refusing to ship to %s: %w", w.dir, err)
	}
	if n == 0 {
		return nil
	}
	create, mkdir := w.file == nil, !w.made
	p := path.Join(w.dir, f.name)
	deadline := time.Now().Add(conn.opts.Timeout)
	err = conn.do(ctx, "commit to "+p, func(cl *hdfs.Client) error {
		if mkdir {
			if err := cl.MkdirAll(w.dir, 0o755); err != nil {
				return err
			}
		}
		fw, err := open(cl, p, create)
		if err != nil {
			return err
		}
		fw.SetDeadline(deadline) // DataNode I/O; the NameNode calls are bounded by do
		for _, piece := range pieces {
			if _, err := fw.Write(piece); err != nil {
				return err
			}
		}
		return closeFile(fw)
	})
	if err != nil {
		w.file = nil // a failed writer is never reused: the next round starts a new file
		conn.Reset() // and the lease this client held on it goes
		return err
	}
	f.size += n
	f.next = next
	f.entries = append(f.entries, entries...)
	w.next, w.file, w.made = next, f, true
	if f.size >= w.opts.RollBytes {
		w.file = nil
		if w.writeIndex(ctx, conn, f) != nil {
			w.unindexed = f
		}
	}
	return nil
}

// open opens the file at p for writing: Create for a new file (replacing one of the
// same name, which an earlier round of this epoch created at this same base and never
// got acknowledged), Append for the writer's current file.
func open(cl *hdfs.Client, p string, create bool) (*hdfs.FileWriter, error) {
	if !create {
		return appendTo(cl, p)
	}
	fw, err := cl.Create(p)
	if errors.Is(err, os.ErrExist) {
		if err := cl.Remove(p); err != nil {
			return nil, err
		}
		fw, err = cl.Create(p)
	}
	return fw, err
}

// appendTo opens p for append, waiting out the NameNode's transient refusal right after
// the file's last close: colinmarc/hdfs appends without a new generation stamp, and
// until the DataNode's report of the finalized block lands the NameNode counts no live
// replica of it ("not sufficiently replicated yet", or NotReplicatedYetException while
// the block is only committed). Giving the file up on that would start a new file
// after every such race, which is most commits right after a broker fault. The waits
// total about 1.5 s; the caller's timeout bounds the whole round.
func appendTo(cl *hdfs.Client, p string) (*hdfs.FileWriter, error) {
	fw, err := cl.Append(p)
	for i := 0; err != nil && notReplicatedYet(err) && i < 5; i++ {
		time.Sleep(time.Duration(50<<i) * time.Millisecond)
		fw, err = cl.Append(p)
	}
	return fw, err
}

// notReplicatedYet reports whether err is the NameNode's refusal of an append while
// the last block's replica is not counted yet.
func notReplicatedYet(err error) bool {
	var re hdfs.Error
	if !errors.As(err, &re) {
		return false
	}
	return strings.Contains(re.Exception(), "NotReplicatedYetException") ||
		strings.Contains(re.Message(), "is not sufficiently replicated yet") ||
		strings.Contains(re.Message(), "NotReplicatedYetException")
}

// closeFile closes fw, which is the commit: it returns once every packet is acknowledged
// and the NameNode completed the file. ErrReplicating means the data is written and the
// NameNode has not heard from the DataNodes yet: Close again, as the Java client does.
func closeFile(fw *hdfs.FileWriter) error {
	err := fw.Close()
	for i := 0; hdfs.IsErrReplicating(err) && i < 8; i++ {
		time.Sleep(time.Duration(10<<i) * time.Millisecond)
		err = fw.Close()
	}
	return err
}

// writeIndex writes the index of the sealed file f.
func (w *Writer) writeIndex(ctx context.Context, conn *Conn, f *dataFile) error {
	b := (&fileIndex{next: f.next, size: f.size, entries: f.entries}).encode()
	p := path.Join(w.dir, f.name+indexSuffix)
	err := conn.do(ctx, "write index "+p, func(cl *hdfs.Client) error { return writeWhole(cl, p, b) })
	if err != nil {
		conn.Reset()
	}
	return err
}

// writeWhole writes b as the new file p (replacing one of that name) and closes it.
func writeWhole(cl *hdfs.Client, p string, b []byte) error {
	fw, err := open(cl, p, true)
	if err != nil {
		return err
	}
	if _, err := fw.Write(b); err != nil {
		return err
	}
	return closeFile(fw)
}
