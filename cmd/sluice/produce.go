package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sync"
	"time"

	"sluice/client"
	"sluice/codec"
)

// produceFlags are the flags of `sluice produce`.
type produceFlags struct {
	broker, topic, acks, codec string
	key                        bool
	timeout                    time.Duration
	sec                        securityFlags
}

// produce sends the lines of stdin as records: `sluice produce --broker ADDR --topic T
// [--key] [--acks accepted|persisted] [--codec C]`. Lines end at \n or \r\n: one \r
// before a line's \n is dropped (bufio.ScanLines), so CRLF input makes the same records
// as LF input; a value cannot end in \r. With --key, the key of a record is
// the text before the first tab or space of its line and the value the text after that
// character (a line with neither is a value without key). A record holds at most
// client.MaxRecordBytes of key and value: a longer line stops produce with its number.
// The exit status is 0 only when every line reached the requested level.
func produce(args []string, stdin io.Reader, _, stderr io.Writer) error {
	f, level, err := parseProduceFlags(args)
	if err != nil {
		return err
	}
	c, err := codec.ParseCodec(f.codec)
	if err != nil {
		return usageError{err.Error()}
	}
	startCtx, cancelStart := commandContext(f.timeout)
	secOpts, err := f.sec.opts()
	if err != nil {
		cancelStart()
		return err
	}
	p, err := client.NewProducer(startCtx, f.topic, append(secOpts, client.Brokers(f.broker), client.Compression(c))...)
	err = reachError(startCtx, err, f.broker, f.timeout)
	cancelStart()
	if err != nil {
		return err
	}
	ctx, cancel := commandContext(0)
	defer cancel()
	n, sendErr := linesUntil(ctx, stdin, f.key, maxLine, func(r *client.Record) error { return p.Produce(ctx, r) })
	return finishProduce(p, n, level, f.timeout, sendErr, stderr)
}

// linesUntil is readLines until ctx ends (SIGINT, SIGTERM): the lines are read on a
// goroutine of their own, since a read of stdin cannot be interrupted, and a terminal or
// a pipe that stays open would otherwise keep produce from stopping until SIGKILL (a
// review found it so). When ctx ends first it returns how many lines were sent and an
// error saying produce was interrupted; the reading goroutine sends nothing more and is
// left in its read (the process is about to exit). A send in progress returns once ctx
// ends (client.Producer.Produce waits for room under ctx), so the count is exact: a line
// counts once the producer took it.
func linesUntil(ctx context.Context, r io.Reader, withKey bool, limit int, send func(*client.Record) error) (int, error) {
	var mu sync.Mutex // held by a send and its count; uncontended but at the interrupt
	sent, stopped := 0, false
	done := make(chan error, 1)
	go func() {
		_, err := readLines(r, withKey, limit, func(rec *client.Record) error {
			mu.Lock()
			defer mu.Unlock()
			if stopped {
				return errInterrupted
			}
			if err := send(rec); err != nil {
				return err
			}
			sent++
			return nil
		})
		done <- err
	}()
	select {
	case err := <-done:
		return sent, err // the goroutine wrote sent before it sent on done
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	stopped = true
	return sent, fmt.Errorf("%w after %d lines: %w", errInterrupted, sent, context.Cause(ctx))
}

// errInterrupted is the error of a produce stopped by a signal.
var errInterrupted = errors.New("interrupted")

func parseProduceFlags(args []string) (*produceFlags, client.Ack, error) {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	f := &produceFlags{}
	fs.StringVar(&f.broker, "broker", "127.0.0.1:9440", "broker address host:port")
	fs.StringVar(&f.topic, "topic", "", "topic (required)")
	fs.BoolVar(&f.key, "key", false, "take each record's key from its line: the text before the first tab or space")
	fs.StringVar(&f.acks, "acks", "persisted", "wait until every line is accepted or persisted")
	fs.StringVar(&f.codec, "codec", "none", "compression: none, zstd, s2 or lz4")
	fs.DurationVar(&f.timeout, "timeout", time.Minute, "how long to wait for the broker at start, and for the last acknowledgements")
	f.sec = newSecurityFlags(fs)
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

// maxLine is the largest record `sluice produce` makes of a line: the value, or with
// --key the key and the value (the separator between them not counted). Such a record
// fits a batch alone.
const maxLine = client.MaxRecordBytes

// readLines turns every line of r into a record (see produce) handed to send, and returns
// how many it sent. A line whose record is larger than limit (maxLine: a larger one
// cannot fit a batch) is refused with its number, before it is sent.
func readLines(r io.Reader, withKey bool, limit int, send func(*client.Record) error) (int, error) {
	sc := bufio.NewScanner(r)
	// The buffer grows as needed up to the longest line: the record, a key separator,
	// "\r\n", and one byte more to tell a line that is too long.
	sc.Buffer(make([]byte, min(limit+4, 64<<10)), limit+4)
	n := 0
	for sc.Scan() {
		var rec client.Record
		rec.Value = sc.Bytes()
		if withKey {
			if i := bytes.IndexAny(rec.Value, "\t "); i >= 0 {
				rec.Key, rec.Value = rec.Value[:i], rec.Value[i+1:]
			}
		}
		if size := len(rec.Key) + len(rec.Value); size > limit {
			return n, fmt.Errorf("cannot produce line %d: its record of %d bytes is larger than the largest record, %d bytes", n+1, size, limit)
		}
		if err := send(&rec); err != nil {
			return n, fmt.Errorf("cannot produce line %d: %w", n+1, err)
		}
		n++
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return n, fmt.Errorf("cannot produce line %d: longer than the largest record, %d bytes", n+1, limit)
	} else if err != nil {
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
	closeCtx := ctx
	if level == client.AckAccepted && flushErr == nil && sendErr == nil {
		// Accepted is all that was asked: Close must not wait for the checkpoint (up to
		// a whole fsync interval), so it gets a context that has already ended.
		done, stop := context.WithCancel(ctx)
		stop()
		closeCtx = done
	}
	closeErr := p.Close(closeCtx)
	var ue *client.UnpersistedError
	if errors.As(closeErr, &ue) && level == client.AckAccepted && flushErr == nil && sendErr == nil {
		closeErr = nil // accepted is what was asked for
	}
	if err := errors.Join(sendErr, flushErr, closeErr); err != nil {
		if ue != nil {
			fmt.Fprintf(stderr, "sluice: %d of %d records not persisted\n", len(ue.Records), n)
		}
		return err
	}
	return nil
}
