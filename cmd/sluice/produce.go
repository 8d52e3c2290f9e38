package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"sluice/batch"
	"sluice/client"
	"sluice/codec"
)

// stdin is what `sluice produce` reads; tests replace it.
var stdin io.Reader = os.Stdin

// produceFlags are the flags of `sluice produce`.
type produceFlags struct {
	broker, topic, acks, codec string
	key                        bool
	timeout                    time.Duration
}

// produce sends the lines of stdin as records: `sluice produce --broker ADDR --topic T
// [--key] [--acks accepted|persisted] [--codec C]`. With --key, the key of a record is
// the text before the first tab or space of its line and the value the text after that
// character (a line with neither is a value without key). The exit status is 0 only when
// every line reached the requested level.
func produce(args []string, _, stderr io.Writer) error {
	f, level, err := parseProduceFlags(args)
	if err != nil {
		return err
	}
	c, err := codec.ParseCodec(f.codec)
	if err != nil {
		return usageError{err.Error()}
	}
	startCtx, cancelStart := commandContext(f.timeout)
	p, err := client.NewProducer(startCtx, f.topic, client.Brokers(f.broker), client.Compression(c))
	cancelStart()
	if err != nil {
		return err
	}
	ctx, cancel := commandContext(0)
	defer cancel()
	n, sendErr := sendLines(ctx, p, f.key)
	return finishProduce(p, n, level, f.timeout, sendErr, stderr)
}

func parseProduceFlags(args []string) (*produceFlags, client.Ack, error) {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	f := &produceFlags{}
	fs.StringVar(&f.broker, "broker", "127.0.0.1:9440", "broker address host:port")
	fs.StringVar(&f.topic, "topic", "", "topic (required)")
	fs.BoolVar(&f.key, "key", false, "take each record's key from its line: the text before the first tab or space")
	fs.StringVar(&f.acks, "acks", "persisted", "wait until every line is accepted or persisted")
	fs.StringVar(&f.codec, "codec", "none", "compression: none, zstd, s2 or lz4")
	fs.DurationVar(&f.timeout, "timeout", time.Minute, "how long to wait for the broker at start, and for the last acknowledgements")
	if err := noPositional(fs, args); err != nil {
		return nil, 0, err
	}
	if f.topic == "" {
		return nil, 0, usageError{"--topic is required"}
	}
	switch f.acks {
	case "accepted":
		return f, client.AckAccepted, nil
	case "persisted":
		return f, client.AckPersisted, nil
	}
	return nil, 0, usageError{"--acks must be accepted or persisted"}
}

// sendLines produces every line of stdin and returns how many it produced.
func sendLines(ctx context.Context, p *client.Producer, withKey bool) (int, error) {
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 64<<10), batch.MaxSize/2)
	n := 0
	for sc.Scan() {
		var r client.Record
		r.Value = sc.Bytes()
		if withKey {
			if i := bytes.IndexAny(r.Value, "\t "); i >= 0 {
				r.Key, r.Value = r.Value[:i], r.Value[i+1:]
			}
		}
		if err := p.Produce(ctx, &r); err != nil {
			return n, fmt.Errorf("cannot produce line %d: %w", n+1, err)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		return n, fmt.Errorf("cannot read line %d of stdin: %w", n+1, err)
	}
	return n, nil
}

// finishProduce waits for the requested level and closes the producer; an error means
// some line did not reach it.
func finishProduce(p *client.Producer, n int, level client.Ack, timeout time.Duration, sendErr error, stderr io.Writer) error {
	ctx, cancel := commandContext(timeout)
	defer cancel()
	var flushErr error
	if level == client.AckAccepted && sendErr == nil {
		flushErr = p.Flush(ctx)
	}
	closeErr := p.Close(ctx)
	var ue *client.UnpersistedError
	if errors.As(closeErr, &ue) && level == client.AckAccepted && flushErr == nil && sendErr == nil {
		closeErr = nil // accepted is what was asked for
	}
	if err := errors.Join(sendErr, flushErr, closeErr); err != nil {
		if ue != nil {
			fmt.Fprintf(stderr, "sluice: %d of %d records not persisted\n", len(ue.Records), n)
		}
		return problemError{err}
	}
	return nil
}
