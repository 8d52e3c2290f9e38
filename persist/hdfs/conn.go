package hdfs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/colinmarc/hdfs/v2"
)

// ErrTimeout is returned (wrapped) by a call to HDFS that did not return within the
// connection's timeout.
var ErrTimeout = errors.New("hdfs: call timed out")

// errAbandoned ends a call that was given up before its client was ready (nobody reads
// it: the caller had its timeout already).
var errAbandoned = errors.New("hdfs: call given up before it started")

// Options say how to reach HDFS.
type Options struct {
	Addresses []string      // the NameNode's RPC addresses (host:port)
	User      string        // the HDFS user the broker acts as
	Timeout   time.Duration // bound of every call (a write round, a read, a listing); default 10 s
}

func (o *Options) ensureDefaults() error {
	if len(o.Addresses) == 0 {
		return errors.New("hdfs: no NameNode address")
	}
	if o.User == "" {
		return errors.New("hdfs: no user (hdfs.user)")
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	return nil
}

// Conn is one connection to HDFS whose every call has a deadline. colinmarc/hdfs takes
// no deadline or context for NameNode calls, and its client's Close waits for a call in
// progress, so a call is run on a goroutine of its own; when it outlives the timeout, the
// sockets the client dialed are closed under it (which ends the stuck call with an error
// as soon as the kernel says so), the client is dropped, and the next call dials a new
// one. Dropping the client also ends its lease renewal, so the NameNode recovers a file
// it left open (after dfs.namenode.lease-hard-limit-sec).
//
// Safe for concurrent use, but calls on one Conn are serialized by the client itself:
// the shipper gives each of its goroutines a Conn of its own.
type Conn struct {
	opts    Options
	refused atomic.Uint64 // append pipelines refused, by any of its clients (pipeline.go)
	mu      struct {
		sync.Mutex
		client *hdfs.Client
		gen    *generation // client's sockets
		closed bool
	}
}

// generation is the sockets one client dialed (NameNode and DataNodes), closed together
// when the client is dropped, and the check of the pipelines its calls set up: a call
// that do abandoned goes on with its client, so its check is never the next call's.
type generation struct {
	mu      sync.Mutex
	socks   []net.Conn
	dropped bool
	guard   pipelineGuard
}

func (g *generation) add(s net.Conn) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.dropped {
		s.Close()
		return errors.New("hdfs: connection reset")
	}
	g.socks = append(g.socks, s)
	return nil
}

func (g *generation) drop() {
	g.mu.Lock()
	socks := g.socks
	g.socks, g.dropped = nil, true
	g.mu.Unlock()
	for _, s := range socks {
		s.Close()
	}
}

// NewConn returns a connection to HDFS; it dials on first use.
func NewConn(opts Options) (*Conn, error) {
	if err := opts.ensureDefaults(); err != nil {
		return nil, err
	}
	return &Conn{opts: opts}, nil
}

// client returns the current client and its pipeline check, dialing one if there is
// none (colinmarc/hdfs dials the NameNode when it makes a client, so that happens outside
// c.mu).
func (c *Conn) client() (*hdfs.Client, *pipelineGuard, error) {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return nil, nil, errors.New("hdfs: connection closed")
	}
	if cl := c.mu.client; cl != nil {
		g := &c.mu.gen.guard
		c.mu.Unlock()
		return cl, g, nil
	}
	c.mu.Unlock()
	gen := &generation{}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		d := net.Dialer{Timeout: c.opts.Timeout}
		s, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return s, gen.add(s)
	}
	// DataNode connections check the pipeline an append sets up (pipeline.go).
	dialDataNode := func(ctx context.Context, network, addr string) (net.Conn, error) {
		s, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &guardConn{Conn: s, g: &gen.guard, refused: &c.refused}, nil
	}
	cl, err := hdfs.NewClient(hdfs.ClientOptions{Addresses: c.opts.Addresses, User: c.opts.User,
		NamenodeDialFunc: dial, DatanodeDialFunc: dialDataNode})
	if err != nil {
		gen.drop()
		return nil, nil, fmt.Errorf("cannot connect to the NameNode: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed || c.mu.client != nil { // closed, or another call dialed first
		gen.drop()
		go cl.Close()
		if c.mu.closed {
			return nil, nil, errors.New("hdfs: connection closed")
		}
		return c.mu.client, &c.mu.gen.guard, nil
	}
	c.mu.client, c.mu.gen = cl, gen
	return cl, &gen.guard, nil
}

// Reset drops the current client: its sockets are closed at once and the client closed
// in the background (its Close waits for a call in progress). The next call dials anew.
func (c *Conn) Reset() {
	c.mu.Lock()
	cl, gen := c.mu.client, c.mu.gen
	c.mu.client, c.mu.gen = nil, nil
	c.mu.Unlock()
	if gen != nil {
		gen.drop()
	}
	if cl != nil {
		go cl.Close()
	}
}

// Close drops the client for good.
func (c *Conn) Close() {
	c.mu.Lock()
	c.mu.closed = true
	c.mu.Unlock()
	c.Reset()
}

// do runs f with the client for at most the timeout (and ctx). On a timeout or ctx's end
// the client is reset and f is left to end on its own; f must therefore touch nothing the
// caller uses afterwards. what names the call in errors.
func (c *Conn) do(ctx context.Context, what string, f func(cl *hdfs.Client) error) error {
	return c.doGuarded(ctx, what, func(cl *hdfs.Client, _ *pipelineGuard) error { return f(cl) })
}

// doGuarded is do for a call that writes: f also gets the pipeline check of its client
// (pipeline.go), which no call that do abandoned shares.
func (c *Conn) doGuarded(ctx context.Context, what string, f func(cl *hdfs.Client, g *pipelineGuard) error) error {
	done := make(chan error, 1)
	// abandoned is set when the call is given up. A call given up while its client was
	// still dialing the NameNode would otherwise run f once that dial ends, perhaps on
	// the client the next call dialed meanwhile (client hands it over), beside that call
	// and with its guard: it stops instead. (Given up during f, its client's sockets are
	// closed under it by Reset, and f fails.)
	var abandoned atomic.Bool
	go func() {
		cl, g, err := c.client()
		if err == nil && abandoned.Load() {
			err = errAbandoned
		}
		if err == nil {
			err = f(cl, g)
		}
		done <- err
	}()
	timer := time.NewTimer(c.opts.Timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("hdfs: %s: %w", what, err)
		}
		return nil
	case <-timer.C:
		abandoned.Store(true)
		c.Reset()
		return fmt.Errorf("hdfs: %s: %w after %v", what, ErrTimeout, c.opts.Timeout)
	case <-ctx.Done():
		abandoned.Store(true)
		c.Reset()
		return fmt.Errorf("hdfs: %s: %w", what, ctx.Err())
	}
}

// Ping checks that the NameNode answers (a Stat of "/"), within the timeout.
func (c *Conn) Ping(ctx context.Context) error {
	return c.do(ctx, "ping", func(cl *hdfs.Client) error {
		_, err := cl.Stat("/")
		return err
	})
}

// RemoteMessage returns the first line of the Java exception's message behind err when
// HDFS sent one (colinmarc/hdfs's errors name only the exception's class), else "".
// Logs carry it: "append call failed with ERROR_APPLICATION" alone does not say why.
func RemoteMessage(err error) string {
	var re hdfs.Error
	if !errors.As(err, &re) {
		return ""
	}
	m, _, _ := strings.Cut(re.Message(), "\n")
	const most = 400
	if len(m) > most {
		m = m[:most]
	}
	return m
}

// Probe reports whether the HDFS at addr takes writes: it creates, writes and closes a
// one-byte file (/.sluice-probe), within timeout. Harnesses poll it while HDFS starts.
func Probe(addr string, timeout time.Duration) error {
	c, err := NewConn(Options{Addresses: []string{addr}, User: "sluice", Timeout: timeout})
	if err != nil {
		return err
	}
	defer c.Close()
	return c.do(context.Background(), "probe", func(cl *hdfs.Client) error {
		return writeWhole(cl, "/.sluice-probe", []byte{1})
	})
}
