package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// The ceilings do no messaging: they move the same record bytes with the least work the
// kernel allows, in the same process as the harness, over 127.0.0.1.
//
//   - tcp: a producer packs records into BatchBytes buffers and writes them to a socket
//     that a goroutine drains; a consumer reads a socket that a goroutine feeds from one
//     BatchBytes buffer in memory, and splits what it reads into records.
//   - sendfile: a producer appends BatchBytes buffers to a plain file (the page cache, no
//     fsync); a consumer gets that file over a socket with sendfile (io.Copy from an
//     *os.File to a *net.TCPConn) and splits it into records.
//
// Both are ceilings for a broker on this host: a broker does at least this work. The
// "broker" address of a ceiling is a directory for the sendfile files (default: the
// system temporary directory).
func init() {
	register("tcp", func(addr string) (Driver, error) { return &ceilingDriver{sendfile: false, dir: addr}, nil })
	register("sendfile", func(addr string) (Driver, error) { return &ceilingDriver{sendfile: true, dir: addr}, nil })
}

type ceilingDriver struct {
	sendfile bool
	dir      string
}

func (d *ceilingDriver) Prepare(ctx context.Context, c *Config) error { return nil }
func (d *ceilingDriver) Close() error                                 { return nil }

func (d *ceilingDriver) path(topic string) string {
	dir := d.dir
	if dir == "" {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "sluice-bench-"+topic+".data")
}

// loopback returns the two ends of a TCP connection over 127.0.0.1.
func loopback() (client, server *net.TCPConn, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() { c, err := ln.Accept(); ch <- accepted{c, err} }()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return nil, nil, err
	}
	a := <-ch
	if a.err != nil {
		cc.Close()
		return nil, nil, a.err
	}
	return cc.(*net.TCPConn), a.c.(*net.TCPConn), nil
}

func (d *ceilingDriver) NewProducer(ctx context.Context, c *Config) (Producer, error) {
	p := &ceilingProducer{buf: make([]byte, 0, c.BatchBytes), linger: c.Linger}
	if d.sendfile {
		f, err := os.OpenFile(d.path(c.Topic), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		p.w = f
		return p, nil
	}
	cc, sc, err := loopback()
	if err != nil {
		return nil, err
	}
	p.w = cc
	p.sink.Go(func() {
		buf := make([]byte, 1<<20)
		for {
			if _, err := sc.Read(buf); err != nil {
				sc.Close()
				return
			}
		}
	})
	return p, nil
}

// ceilingProducer writes whole buffers; a buffer goes out when full, at Flush, or when a
// Send finds it older than the linger (there is no timer goroutine: a paced producer
// calls Send often enough for end-to-end runs).
type ceilingProducer struct {
	w      io.WriteCloser
	buf    []byte
	first  time.Time // when the oldest buffered record came
	linger time.Duration
	sink   sync.WaitGroup
}

func (p *ceilingProducer) Send(ctx context.Context, v []byte, _ func(error)) error {
	if len(p.buf)+len(v) > cap(p.buf) {
		if err := p.write(); err != nil {
			return err
		}
	}
	if len(p.buf) == 0 {
		p.first = time.Now()
	}
	p.buf = append(p.buf, v...)
	if time.Since(p.first) >= p.linger {
		return p.write()
	}
	return nil
}

func (p *ceilingProducer) write() error {
	if len(p.buf) == 0 {
		return nil
	}
	_, err := p.w.Write(p.buf)
	p.buf = p.buf[:0]
	return err
}

func (p *ceilingProducer) Acks() bool                      { return false }
func (p *ceilingProducer) Flush(ctx context.Context) error { return p.write() }
func (p *ceilingProducer) Close() error {
	err := p.w.Close()
	p.sink.Wait()
	return err
}

func (d *ceilingDriver) NewConsumer(ctx context.Context, c *Config, i, n int) (Consumer, error) {
	if n > 1 {
		return nil, errors.New("ceilings have one consumer")
	}
	if !c.FromStart {
		return nil, fmt.Errorf("the %s ceiling has no tail to follow: consume from the start", map[bool]string{true: "sendfile", false: "tcp"}[d.sendfile])
	}
	cc, sc, err := loopback()
	if err != nil {
		return nil, err
	}
	cs := &ceilingConsumer{conn: cc, size: c.RecordSize}
	if d.sendfile {
		f, err := os.Open(d.path(c.Topic))
		if err != nil {
			cc.Close()
			sc.Close()
			return nil, err
		}
		cs.feed.Go(func() {
			defer sc.Close()
			defer f.Close()
			io.Copy(sc, f) // sendfile(2)
		})
		return cs, nil
	}
	// tcp: serve Count records (or without a count, until the consumer closes) from one
	// buffer in memory.
	buf := make([]byte, c.BatchBytes/c.RecordSize*c.RecordSize)
	fillPayload(buf, 1)
	total := c.Count * int64(c.RecordSize)
	cs.feed.Go(func() {
		defer sc.Close()
		for sent := int64(0); total == 0 || sent < total; {
			b := buf
			if total > 0 {
				b = b[:min(int64(len(b)), total-sent)]
			}
			if _, err := sc.Write(b); err != nil {
				return
			}
			sent += int64(len(b))
		}
	})
	return cs, nil
}

type ceilingConsumer struct {
	conn    *net.TCPConn
	size    int
	feed    sync.WaitGroup
	arrived int64 // when the read that brought the current records returned (Arrivals)
}

// Arrived returns when the read that brought the current record returned (Unix ns).
func (c *ceilingConsumer) Arrived() int64 { return c.arrived }

func (c *ceilingConsumer) Run(ctx context.Context, fn func([]byte) bool) error {
	stop := context.AfterFunc(ctx, func() { c.conn.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, 1<<20/c.size*c.size+c.size)
	have := 0
	for {
		n, err := c.conn.Read(buf[have:])
		c.arrived = time.Now().UnixNano()
		have += n
		recs := have / c.size
		for i := range recs {
			if !fn(buf[i*c.size : (i+1)*c.size]) {
				return nil
			}
		}
		have = copy(buf, buf[recs*c.size:have])
		if err != nil {
			if err == io.EOF || ctx.Err() != nil {
				<-ctx.Done() // the source is exhausted; the run ends on idleness
				return nil
			}
			return err
		}
	}
}

func (c *ceilingConsumer) Close() error {
	err := c.conn.Close()
	c.feed.Wait()
	return err
}
