// Package segment implements the partition tools behind `sluice segment dump`, `sluice
// segment verify` and `sluice segment repair`, and the demo log behind `sluice segment
// demo`.
//
// Dump and Verify never change the directory (they do not run recovery); they report what
// they find, telling a torn tail (above the recovery point: opening the log cuts it off)
// from damage (acknowledged data at or below it: only a repair removes it). Repair is
// the one tool that writes: the operator's cut of a damaged partition, with the broker
// stopped. Functions are safe to call concurrently on different directories.
package segment

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"sluice/batch"
	"sluice/internal/dirlock"
	"sluice/persist/local"
)

// ErrProblems is returned when a partition directory has problems; they have been printed.
var ErrProblems = errors.New("partition directory has problems")

// Dump prints every batch of the partition in dir: segment, position, offsets, record
// count, size, timestamps, codec and producer; then any problems.
func Dump(w io.Writer, dir string) error {
	fmt.Fprintf(w, "%-24s %12s %12s %12s %6s %9s %-23s %-23s %-5s %s\n",
		"SEGMENT", "POSITION", "BASE", "LAST", "COUNT", "BYTES", "FIRST TIME", "MAX TIME", "CODEC", "PRODUCER/SEQ")
	problems, err := local.Inspect(nil, dir, func(b local.BatchInfo) {
		h := &b.Header
		fmt.Fprintf(w, "%-24s %12d %12d %12d %6d %9d %-23s %-23s %-5s %d/%d\n",
			filepath.Base(b.Segment), b.Pos, h.BaseOffset, h.LastOffset(), h.Count, h.Size(),
			formatMillis(h.FirstTimestamp), formatMillis(h.MaxTimestamp), h.Codec, h.ProducerID, h.BaseSequence)
	})
	if err != nil {
		return err
	}
	return report(w, problems)
}

// Verify checks every batch (header, CRC, offset continuity) and every sealed segment's
// index files, prints a summary or the problems, and returns ErrProblems if there are any.
func Verify(w io.Writer, dir string) error {
	var batches, records, bytes int64
	first, next := int64(-1), int64(-1)
	segments := map[string]bool{}
	problems, err := local.Inspect(nil, dir, func(b local.BatchInfo) {
		if first < 0 {
			first = b.Header.BaseOffset
		}
		next = b.Header.LastOffset() + 1
		batches++
		records += int64(b.Header.Count)
		bytes += int64(b.Header.Size())
		segments[b.Segment] = true
	})
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return report(w, problems)
	}
	if batches == 0 {
		fmt.Fprintf(w, "ok: %s holds no batches; %s\n", dir, recoveryPoint(dir))
		return nil
	}
	fmt.Fprintf(w, "ok: %s: %d segments, %d batches, %d records, offsets [%d, %d), %d bytes; %s\n",
		dir, len(segments), batches, records, first, next, bytes, recoveryPoint(dir))
	return nil
}

// recoveryPoint describes the directory's recovery point for a report.
func recoveryPoint(dir string) string {
	rp, err := local.ReadRecoveryPoint(nil, dir)
	switch {
	case errors.Is(err, local.ErrNoRecoveryPoint):
		return "no recovery point (the last segment is treated as a tail)"
	case err != nil:
		return fmt.Sprintf("unreadable recovery point: %v", err)
	case rp.Clean:
		return fmt.Sprintf("recovery point %d (clean shutdown)", rp.Offset)
	}
	return fmt.Sprintf("recovery point %d", rp.Offset)
}

// Repair cuts the partition in dir at offset at: every batch from at on is removed (at
// must be a batch boundary; otherwise the error names the nearest ones), later segments
// are deleted and the recovery point rewritten. It prints what it removes, including how
// many acknowledged records (at or below the old recovery point) are given up. With
// dryRun it prints the same and changes nothing. The broker must be stopped.
func Repair(w io.Writer, dir string, at int64, dryRun bool) error {
	// DIR is DATA/TOPIC/PARTITION: refuse while a broker holds DATA.
	if err := dirlock.CheckFree(filepath.Dir(filepath.Dir(filepath.Clean(dir)))); err != nil && !dryRun {
		return fmt.Errorf("cannot repair %s: stop the broker first: %w", dir, err)
	}
	p, err := local.PlanRepair(nil, dir, at)
	if err != nil {
		return fmt.Errorf("cannot repair %s at offset %d: %w", dir, at, err)
	}
	verb := "removing"
	if dryRun {
		verb = "would remove"
	}
	fmt.Fprintf(w, "repair %s: cut at offset %d\n", dir, at)
	if p.CutBytes > 0 || p.Pos == 0 {
		fmt.Fprintf(w, "  %s: truncate at position %d, %s %d bytes\n", filepath.Base(p.Segment), p.Pos, verb, p.CutBytes)
	}
	for _, d := range p.Deleted {
		fmt.Fprintf(w, "  %s: delete (with its index files)\n", filepath.Base(d))
	}
	fmt.Fprintf(w, "  %s offsets [%d, %d) and any bad data after them: %d bytes in %d segment file(s) cut or deleted\n",
		verb, p.At, p.End, p.CutBytes+p.DeletedBytes, len(p.Deleted)+min(1, int(p.CutBytes)))
	switch {
	case !p.HasOld:
		fmt.Fprintf(w, "  no readable recovery point: how much of this was acknowledged is unknown; new recovery point %d\n", p.New)
	default:
		fmt.Fprintf(w, "  recovery point %d -> %d: %d acknowledged record(s) at or below it given up\n", p.Old.Offset, p.New, p.Acknowledged)
	}
	if dryRun {
		fmt.Fprintln(w, "dry run: nothing changed")
		return nil
	}
	if err := p.Apply(); err != nil {
		return fmt.Errorf("cannot repair %s at offset %d: %w", dir, at, err)
	}
	fmt.Fprintln(w, "done")
	return nil
}

func report(w io.Writer, problems []error) error {
	for _, p := range problems {
		fmt.Fprintf(w, "PROBLEM: %v\n", p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %d found", ErrProblems, len(problems))
	}
	return nil
}

func formatMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// Demo writes a small partition log into dir (n batches of 10 records) with the default
// settings, for trying the tools: each batch is placed and persisted, as the broker does
// with its write buffer. It refuses a directory that already holds a log.
func Demo(dir string, n int, segmentBytes int64) error {
	l, err := local.Open(dir, local.Options{SegmentBytes: segmentBytes})
	if err != nil {
		return err
	}
	if l.Next() != l.Start() {
		l.Close()
		return fmt.Errorf("cannot write a demo log into %s: it already holds offsets [%d, %d)", dir, l.Start(), l.Next())
	}
	src := local.NewMemSource()
	var b batch.Builder
	now := time.Now()
	for i := range n {
		b.Reset(nil, 0, -1)
		for j := range 10 {
			b.Add(uint16(i*10+j), now.UnixMilli()+int64(i), fmt.Appendf(nil, "key-%d", j), fmt.Appendf(nil, "demo record %d.%d", i, j))
		}
		if _, err := src.Append(l, b.Finish(), now); err != nil {
			l.Close()
			return err
		}
		if _, err := l.Persist(src); err != nil {
			l.Close()
			return err
		}
	}
	return l.Close()
}
