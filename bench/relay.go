package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
)

// The relay is the end-to-end latency ceiling: a process that passes each producer's
// bytes on to the consumer of the same topic and does nothing else (no parsing, no
// storage, no acknowledgment). A record goes from the harness to the relay and back
// over loopback, crossing two processes as it does through a broker, so its latency is
// what this host gives any broker before the broker does any work: its scheduling of
// woken threads, its loopback TCP, the harness's own pacing. The `relay` driver speaks
// to it; `sluice bench relay -listen ADDR` runs it.
//
// Protocol: a connection's first line is "P TOPIC SIZE" (a producer of records of SIZE
// bytes) or "C TOPIC" (the consumer of TOPIC; a newer one replaces it); after it, a
// producer sends records back to back and the consumer, once the relay answered its
// line with "ok\n" (it is registered: nothing sent after that is dropped), receives them. The relay passes
// on whole records only, so records of several producers never interleave; with no
// consumer connected, records are dropped.

func init() {
	register("relay", func(addr string) (Driver, error) { return &relayDriver{addr: addr}, nil })
}

// ServeRelay serves the relay on ln until ctx ends or ln fails.
func ServeRelay(ctx context.Context, ln net.Listener) error {
	r := &relay{consumers: map[string]*relayOut{}}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("cannot accept a relay connection: %w", err)
		}
		wg.Go(func() {
			defer c.Close()
			stop := context.AfterFunc(ctx, func() { c.Close() })
			defer stop()
			r.serve(c)
		})
	}
}

type relay struct {
	mu        sync.Mutex
	consumers map[string]*relayOut
}

// relayOut is a consumer's connection; mu keeps the writes of several producers whole.
type relayOut struct {
	mu sync.Mutex
	c  net.Conn
}

func (r *relay) serve(c net.Conn) {
	br := bufio.NewReaderSize(c, 1<<20)
	hello, err := br.ReadString('\n')
	if err != nil {
		return
	}
	f := strings.Fields(hello)
	switch {
	case len(f) == 2 && f[0] == "C":
		out := &relayOut{c: c}
		r.mu.Lock()
		r.consumers[f[1]] = out
		r.mu.Unlock()
		out.mu.Lock()
		_, err := c.Write([]byte("ok\n"))
		out.mu.Unlock()
		if err != nil {
			return
		}
		br.WriteTo(discard{}) // until the consumer closes
		r.mu.Lock()
		if r.consumers[f[1]] == out {
			delete(r.consumers, f[1])
		}
		r.mu.Unlock()
	case len(f) == 3 && f[0] == "P":
		size, err := strconv.Atoi(f[2])
		if err != nil || size <= 0 || size > 1<<20 {
			return
		}
		r.pass(f[1], size, br)
	}
}

// pass reads a producer's records and writes every whole one it has to the topic's
// consumer at once: one read and one write per chunk the socket delivers.
func (r *relay) pass(topic string, size int, br *bufio.Reader) {
	buf := make([]byte, max(1<<20/size, 1)*size)
	have := 0
	for {
		n, err := br.Read(buf[have:])
		have += n
		whole := have / size * size
		if whole > 0 {
			r.mu.Lock()
			out := r.consumers[topic]
			r.mu.Unlock()
			if out != nil {
				out.mu.Lock()
				out.c.Write(buf[:whole]) // a consumer gone is the consumer's loss
				out.mu.Unlock()
			}
			have = copy(buf, buf[whole:have])
		}
		if err != nil {
			return
		}
	}
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// relayDriver drives the relay: its producer is the tcp ceiling's (records packed into
// buffers, written when full or when a Send finds the oldest older than the linger),
// its consumer the tcp ceiling's (records split from what each read brings).
type relayDriver struct{ addr string }

func (d *relayDriver) Prepare(ctx context.Context, c *Config) error { return nil }
func (d *relayDriver) Close() error                                 { return nil }

// dial connects to the relay and says what the connection is.
func (d *relayDriver) dial(ctx context.Context, hello string) (*net.TCPConn, error) {
	var dl net.Dialer
	nc, err := dl.DialContext(ctx, "tcp", d.addr)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the relay: %w", err)
	}
	if _, err := nc.Write([]byte(hello)); err != nil {
		nc.Close()
		return nil, fmt.Errorf("cannot reach the relay: %w", err)
	}
	return nc.(*net.TCPConn), nil
}

func (d *relayDriver) NewProducer(ctx context.Context, c *Config) (Producer, error) {
	nc, err := d.dial(ctx, fmt.Sprintf("P %s %d\n", c.Topic, c.RecordSize))
	if err != nil {
		return nil, err
	}
	return &ceilingProducer{w: nc, buf: make([]byte, 0, c.BatchBytes), linger: c.Linger}, nil
}

func (d *relayDriver) NewConsumer(ctx context.Context, c *Config, i, n int) (Consumer, error) {
	if n > 1 {
		return nil, errors.New("the relay has one consumer per topic")
	}
	if c.FromStart {
		return nil, errors.New("the relay keeps nothing: it has only a tail to follow (e2e)")
	}
	nc, err := d.dial(ctx, "C "+c.Topic+"\n")
	if err != nil {
		return nil, err
	}
	ok := make([]byte, 3)
	if _, err := io.ReadFull(nc, ok); err != nil || string(ok) != "ok\n" {
		nc.Close()
		return nil, fmt.Errorf("the relay did not take the consumer: %q, %v", ok, err)
	}
	return &ceilingConsumer{conn: nc, size: c.RecordSize}, nil
}
