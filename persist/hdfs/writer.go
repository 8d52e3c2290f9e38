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
	// PipelineSwitches counts the rounds written into a new file because an append to
	// the current one would not have reached exactly its replicas (pipeline.go).
	PipelineSwitches int
}

// dataFile is what the writer knows of the file it appends to: what was acknowledged.
type dataFile struct {
	name        string
	base        int64
	size        int64
	next        int64
	entries     []indexEntry
	replication int  // of its blocks, once read; 0 before
	short       bool // created through fewer DataNodes than its replicas: never appended to
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
	next, n, err := walkBatches(pieces, w.next, nil)
	if err != nil {
		return fmt.Errorf("hdfs: refusing to ship to %s: %w", w.dir, err)
	}
	if n == 0 {
		return nil
	}
	f := w.file
	if f == nil {
		f = &dataFile{name: fileName(w.next, w.epoch), base: w.next}
	}
	// What the round needs of the writer is copied first: after a timeout the call goes
	// on alone (Conn.do) while the writer takes its next round.
	rd := &round{dir: w.dir, mkdir: !w.made, pieces: pieces, deadline: time.Now().Add(conn.opts.Timeout),
		file: *f, create: w.file == nil, moved: fileName(w.next, w.epoch)}
	err = conn.doGuarded(ctx, "commit to "+path.Join(w.dir, f.name), rd.run)
	if err != nil {
		w.file = nil // a failed writer is never reused: the next round starts a new file
		conn.Reset() // and the lease this client held on it goes
		return err
	}
	if rd.switched {
		w.PipelineSwitches++
		f = &dataFile{name: rd.moved, base: w.next}
	}
	f.replication, f.short = rd.file.replication, rd.file.short
	w.acknowledge(ctx, conn, f, pieces, next, n)
	return nil
}

// round is one commit round's call to HDFS, with copies of what it needs of the writer.
// The call writes switched and file's replication and short; Commit reads them once the
// call returned.
type round struct {
	dir      string
	mkdir    bool
	pieces   [][]byte
	deadline time.Time
	file     dataFile // the writer's file (a copy)
	create   bool     // file is new: the round creates it
	moved    string   // the name of the new file the round goes into if it cannot append
	switched bool     // it went into moved
}

// run writes the round: a new file created, or appended to the current one through a
// pipeline of exactly its replicas, else (or when the file was created through fewer
// DataNodes than its replicas: no append to it can pass) into the new file moved.
// g is the check of cl's pipelines.
func (rd *round) run(cl *hdfs.Client, g *pipelineGuard) error {
	if rd.mkdir {
		if err := cl.MkdirAll(rd.dir, 0o755); err != nil {
			return err
		}
	}
	if rd.create {
		return rd.createFile(cl, g, rd.file.name)
	}
	if rd.file.replication == 0 {
		r, err := fileReplication(cl, path.Join(rd.dir, rd.file.name))
		if err != nil {
			return err
		}
		rd.file.replication = r
	}
	if !rd.file.short {
		err := appendRound(cl, g, path.Join(rd.dir, rd.file.name), rd.file.replication, rd.pieces, rd.deadline)
		if !errors.Is(err, errPipelineMismatch) {
			return err
		}
	}
	rd.switched = true
	return rd.createFile(cl, g, rd.moved)
}

// createFile writes the round as the new file name and learns its replication and
// whether its last block's pipeline reached every replica (a pipeline whose request
// could not be read, as with encrypted data transfer, counts as reaching them).
func (rd *round) createFile(cl *hdfs.Client, g *pipelineGuard, name string) error {
	p := path.Join(rd.dir, name)
	rd.file.replication, rd.file.short = 0, false // not the switched file's
	g.seen.Store(0)
	if err := writeRound(cl, p, rd.pieces, rd.deadline); err != nil {
		return err
	}
	pipeline := int(g.seen.Load())
	r, err := fileReplication(cl, p)
	if err != nil {
		return nil // acknowledged all the same: the first append reads it
	}
	rd.file.replication, rd.file.short = r, pipeline > 0 && pipeline < r
	return nil
}

// acknowledge records a round of n bytes, up to offset next, acknowledged in file f:
// its index entries, the writer's next offset, and the roll once f is full.
func (w *Writer) acknowledge(ctx context.Context, conn *Conn, f *dataFile, pieces [][]byte, next, n int64) {
	last := int64(-1)
	if k := len(f.entries); k > 0 {
		last = f.entries[k-1].pos
	}
	walkBatches(pieces, w.next, func(pos, base int64) { // whole batches: checked before the round
		pos += f.size
		if last < 0 || pos-last >= w.opts.IndexInterval {
			f.entries = append(f.entries, indexEntry{base, pos})
			last = pos
		}
	})
	f.size += n
	f.next = next
	w.next, w.file, w.made = next, f, true
	if f.size >= w.opts.RollBytes {
		w.file = nil
		if w.writeIndex(ctx, conn, f) != nil {
			w.unindexed = f
		}
	}
}

// writeRound writes pieces as the new file p (replacing one of that name, which an
// earlier round of this epoch created at this same base and never got acknowledged).
func writeRound(cl *hdfs.Client, p string, pieces [][]byte, deadline time.Time) error {
	fw, err := createOver(cl, p)
	if err != nil {
		return err
	}
	return writePieces(fw, pieces, deadline)
}

// appendRound appends pieces to the file p, whose blocks have replication replicas,
// through a pipeline of exactly those (pipeline.go; g is cl's check). Another pipeline
// is most often a DataNode whose report of the last round has not reached the NameNode
// yet: the append is given up unchanged and tried again, twice, before the round fails
// with errPipelineMismatch (the caller then writes it into a new file).
func appendRound(cl *hdfs.Client, g *pipelineGuard, p string, replication int, pieces [][]byte, deadline time.Time) error {
	g.want.Store(int32(replication))
	defer g.want.Store(0)
	for try := 0; ; try++ {
		fw, err := appendTo(cl, p)
		if err != nil {
			return err
		}
		fw.SetDeadline(deadline) // DataNode I/O; the NameNode calls are bounded by do
		// The first write that is not empty sets up the pipeline (and is refused, with
		// nothing sent, if it does not reach exactly the replicas).
		first := 0
		for first < len(pieces)-1 && len(pieces[first]) == 0 {
			first++
		}
		_, err = fw.Write(pieces[first])
		if !errors.Is(err, errPipelineMismatch) {
			if err != nil {
				return err
			}
			return writePieces(fw, pieces[first+1:], deadline)
		}
		// Nothing was sent: close the file as it was (the pipeline never formed).
		if cerr := closeFile(fw); cerr != nil {
			return cerr
		}
		if try == 2 {
			return err
		}
		time.Sleep(time.Duration(50<<try) * time.Millisecond)
	}
}

// writePieces writes pieces to fw and closes it: the round's acknowledgment.
func writePieces(fw *hdfs.FileWriter, pieces [][]byte, deadline time.Time) error {
	fw.SetDeadline(deadline)
	for _, piece := range pieces {
		if _, err := fw.Write(piece); err != nil {
			return err
		}
	}
	return closeFile(fw)
}

// fileReplication returns how many replicas the blocks of the file at p have.
func fileReplication(cl *hdfs.Client, p string) (int, error) {
	fi, err := cl.Stat(p)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(interface{ GetBlockReplication() uint32 })
	if !ok || st.GetBlockReplication() == 0 {
		return 0, fmt.Errorf("cannot read the replication of %s", p)
	}
	return int(st.GetBlockReplication()), nil
}

// createOver creates the file at p, replacing one of that name (which an earlier round
// of this epoch created at this same base and never got acknowledged).
func createOver(cl *hdfs.Client, p string) (*hdfs.FileWriter, error) {
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

// writeWhole writes b as the new file p (replacing one of that name) and closes it,
// without a deadline of its own (the caller's Conn.do bounds it).
func writeWhole(cl *hdfs.Client, p string, b []byte) error {
	return writeRound(cl, p, [][]byte{b}, time.Time{})
}
