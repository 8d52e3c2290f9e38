package main

import (
	"flag"
	"io"

	"sluice/tools/segment"
)

// oneDir parses flags and the single DIR argument of a segment command.
func oneDir(fs *flag.FlagSet, args []string) (string, error) {
	if err := parseFlags(fs, args); err != nil {
		return "", err
	}
	if fs.NArg() != 1 {
		return "", usageError{"want exactly one directory"}
	}
	return fs.Arg(0), nil
}

func segmentDump(args []string, _ io.Reader, stdout, _ io.Writer) error {
	dir, err := oneDir(flag.NewFlagSet("dump", flag.ContinueOnError), args)
	if err != nil {
		return err
	}
	return segment.Dump(stdout, dir)
}

// segmentVerify exits 1 when the log has problems (segment.ErrProblems), like any failure.
func segmentVerify(args []string, _ io.Reader, stdout, _ io.Writer) error {
	dir, err := oneDir(flag.NewFlagSet("verify", flag.ContinueOnError), args)
	if err != nil {
		return err
	}
	return segment.Verify(stdout, dir)
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
