package main

import (
	"flag"
	"io"

	"sluice/tools/segment"
)

// oneDir parses flags (before or after it) and the single DIR argument of a segment
// command.
func oneDir(fs *flag.FlagSet, args []string) (string, error) {
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", usageError{"want exactly one directory"}
	}
	return pos[0], nil
}

func segmentDump(args []string, _ io.Reader, stdout, _ io.Writer) error {
	dir, err := oneDir(flag.NewFlagSet("dump", flag.ContinueOnError), args)
	if err != nil {
		return err
	}
	return segment.Dump(stdout, dir)
}

// segmentVerify exits 1 when the log has problems (segment.ErrProblems), like any failure.
// It is meant for a stopped broker's partition directory: on a live partition the broker
// may be writing the last segment, which then shows a torn tail (exit 1) that is no damage.
func segmentVerify(args []string, _ io.Reader, stdout, _ io.Writer) error {
	dir, err := oneDir(flag.NewFlagSet("verify", flag.ContinueOnError), args)
	if err != nil {
		return err
	}
	return segment.Verify(stdout, dir)
}

// segmentRepair is the operator's decision for a damaged partition, with the broker
// stopped. An offset that is not a batch boundary fails (exit 1) naming the nearest ones.
func segmentRepair(args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("repair", flag.ContinueOnError)
	at := fs.Int64("truncate-at", -1, "first offset to remove (a batch boundary)")
	dryRun := fs.Bool("dry-run", false, "print what would be removed and change nothing")
	dir, err := oneDir(fs, args)
	if err != nil {
		return err
	}
	if *at < 0 {
		return usageError{"--truncate-at OFFSET is required"}
	}
	return segment.Repair(stdout, dir, *at, *dryRun)
}

func segmentDemo(args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	batches := fs.Int("batches", 1000, "number of batches of 10 records")
	segBytes := fs.Int64("segment-bytes", 256<<10, "segment size")
	dir, err := oneDir(fs, args)
	if err != nil {
		return err
	}
	if *batches < 1 {
		return usageError{"-batches must be at least 1"}
	}
	return segment.Demo(dir, *batches, *segBytes)
}
