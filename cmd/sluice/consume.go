package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"sluice/client"
)

// consumeFlags are the flags of `sluice consume`.
type consumeFlags struct {
	broker, topic, from, logical, positions string
	max                                     int
	idle, timeout                           time.Duration
	keys                                    bool
}

// consume prints record values, one per line: `sluice consume --broker ADDR --topic T
// [--from oldest|newest|OFFSET|RFC3339-time] [--positions P=OFFSET,...] [--max N]
// [--idle D] [--logical A-B] [--keys] [--timeout D]`. It stops after --max records,
// after --idle without a record, or on SIGINT; it fails (exit 1) when the broker does not
// answer the first metadata request within --timeout, and on damaged data (offsets that
// are not dense, a corrupt batch), after printing the records before it. --positions
// starts the partitions it names at their offsets (client.StartPositions): to read on
// past a batch that cannot be read, at the offset its error says the batch ends before.
// An offset past a partition's end is moved to its end, one below its start to its
// start, without a word (the client clamps it); the partitions not named start at --from.
func consume(args []string, _ io.Reader, stdout, _ io.Writer) error {
	f, opts, err := parseConsumeFlags(args)
	if err != nil {
		return err
	}
	startCtx, cancelStart := commandContext(f.timeout)
	c, err := client.NewConsumer(startCtx, f.topic, opts...)
	err = reachError(startCtx, err, f.broker, f.timeout)
	cancelStart()
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := commandContext(0)
	defer cancel()
	w := bufio.NewWriterSize(stdout, 64<<10)
	defer w.Flush()
	err = printRecords(ctx, c, w, f)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil // interrupted, or idle for --idle
	}
	return err
}

func parseConsumeFlags(args []string) (*consumeFlags, []client.Opt, error) {
	fs := flag.NewFlagSet("consume", flag.ContinueOnError)
	f := &consumeFlags{}
	fs.StringVar(&f.broker, "broker", "127.0.0.1:9440", "broker address host:port")
	fs.StringVar(&f.topic, "topic", "", "topic (required)")
	fs.StringVar(&f.from, "from", "oldest", "start: oldest, newest, an offset, or an RFC 3339 time")
	fs.IntVar(&f.max, "max", 0, "stop after this many records (0: no limit)")
	fs.DurationVar(&f.idle, "idle", 0, "stop after this long without a record (0: never)")
	fs.StringVar(&f.logical, "logical", "", "only records of the logical range A-B (inclusive)")
	fs.StringVar(&f.positions, "positions", "", "start these partitions at these offsets, P=OFFSET[,P=OFFSET...] (the others at --from); an offset past a partition's end starts at its end, one below its start (deleted by retention) at its start, without a warning")
	fs.BoolVar(&f.keys, "keys", false, "print each record's key and a tab before its value")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long to wait for the broker at start (0: forever)")
	tf := newSecurityFlags(fs)
	if err := noPositional(fs, args); err != nil {
		return nil, nil, err
	}
	if f.topic == "" || f.max < 0 {
		return nil, nil, usageError{"--topic is required and --max not negative"}
	}
	start, err := parseFrom(f.from)
	if err != nil {
		return nil, nil, err
	}
	opts, err := tf.opts()
	if err != nil {
		return nil, nil, err
	}
	opts = append(opts, client.Brokers(f.broker), client.Start(start))
	if f.logical != "" {
		lo, hi, err := parseLogicalRange(f.logical)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, client.LogicalRange(lo, hi))
	}
	if f.positions != "" {
		pos, err := parsePositions(f.positions)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, client.StartPositions(pos))
	}
	return f, opts, nil
}

// parsePositions parses --positions: P=OFFSET pairs, comma-separated, each partition
// once, every number at least 0.
func parsePositions(s string) (map[int]int64, error) {
	pos := map[int]int64{}
	for pair := range strings.SplitSeq(s, ",") {
		p, o, ok := strings.Cut(pair, "=")
		id, err1 := strconv.ParseUint(p, 10, 31)
		off, err2 := strconv.ParseInt(o, 10, 64)
		_, dup := pos[int(id)]
		if !ok || err1 != nil || err2 != nil || off < 0 || dup {
			return nil, usageError{fmt.Sprintf("--positions %q: want PARTITION=OFFSET[,PARTITION=OFFSET...], each partition once", s)}
		}
		pos[int(id)] = off
	}
	return pos, nil
}

// parseFrom parses --from.
func parseFrom(s string) (client.StartAt, error) {
	switch s {
	case "oldest":
		return client.Oldest(), nil
	case "newest":
		return client.Newest(), nil
	}
	if off, err := strconv.ParseInt(s, 10, 64); err == nil && off >= 0 {
		return client.AtOffset(off), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return client.AtTime(t), nil
	}
	return client.StartAt{}, usageError{fmt.Sprintf("--from %q: want oldest, newest, an offset or an RFC 3339 time", s)}
}

// parseLogicalRange parses "A-B" with 0 <= A <= B <= 65535.
func parseLogicalRange(s string) (lo, hi uint16, err error) {
	a, b, ok := strings.Cut(s, "-")
	x, err1 := strconv.ParseUint(a, 10, 16)
	y, err2 := strconv.ParseUint(b, 10, 16)
	if !ok || err1 != nil || err2 != nil || x > y {
		return 0, 0, usageError{fmt.Sprintf("--logical %q: want A-B with 0 <= A <= B <= 65535", s)}
	}
	return uint16(x), uint16(y), nil
}

// printRecords prints records until --max of them, --idle without one, or ctx ends.
func printRecords(ctx context.Context, c *client.Consumer, w *bufio.Writer, f *consumeFlags) error {
	n := 0
	last := time.Now()
	for f.max == 0 || n < f.max {
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if f.idle > 0 {
			pctx, cancel = context.WithDeadline(ctx, last.Add(f.idle))
		}
		err := c.Poll(pctx)
		cancel()
		if err != nil {
			return err
		}
		for (f.max == 0 || n < f.max) && c.Next() {
			r := c.Record()
			if f.keys {
				w.Write(r.Key)
				w.WriteByte('\t')
			}
			w.Write(r.Value)
			w.WriteByte('\n')
			n++
			last = time.Now()
		}
		if err := c.Err(); err != nil {
			return err
		}
		w.Flush()
	}
	return nil
}
