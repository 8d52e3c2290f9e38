package main

import (
	"errors"
	"flag"
	"io"

	"sluice/persist/local"
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

func segmentDump(args []string, stdout, _ io.Writer) error {
	dir, err := oneDir(flag.NewFlagSet("dump", flag.ContinueOnError), args)
	if err != nil {
		return err
	}
	return asProblem(segment.Dump(stdout, dir))
}

func segmentVerify(args []string, stdout, _ io.Writer) error {
	dir, err := oneDir(flag.NewFlagSet("verify", flag.ContinueOnError), args)
	if err != nil {
		return err
	}
	return asProblem(segment.Verify(stdout, dir))
}

func segmentRepair(args []string, stdout, _ io.Writer) error {
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
	err = segment.Repair(stdout, dir, *at, *dryRun)
	if errors.Is(err, local.ErrNotBatchBoundary) {
		return problemError{err}
	}
	return err
}

func segmentDemo(args []string, stdout, _ io.Writer) error {
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

// asProblem marks a tool's "found problems" result for exit status 1.
func asProblem(err error) error {
	if errors.Is(err, segment.ErrProblems) {
		return problemError{err}
	}
	return err
}
