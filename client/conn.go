package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"sluice/wire"
)

// minReadBuf is the initial size of a connection's read buffer.
const minReadBuf = 64 << 10

// frameReader reads whole response frames from a connection into a buffer it reuses and
// grows to the largest frame seen. Used by one goroutine at a time.
type frameReader struct {
	r          io.Reader
	maxFrame   int
	buf        []byte
	start, end int // buf[start:end] holds bytes read and not returned yet
}

// next returns the next whole response frame. It aliases the reader's buffer and is valid
// until the next call.
func (fr *frameReader) next() ([]byte, error) {
	for {
		avail := fr.buf[fr.start:fr.end]
		size, _, err := wire.PeekResponse(avail, fr.maxFrame)
		if err != nil && !errors.Is(err, wire.ErrShort) {
			return nil, fmt.Errorf("cannot read answer: %w", err)
		}
		if err == nil && len(avail) >= size {
			fr.start += size
			return avail[:size], nil
		}
		fr.makeRoom(size)
		n, err := fr.r.Read(fr.buf[fr.end:])
		fr.end += n
		if err != nil && n == 0 {
			return nil, fmt.Errorf("cannot read answer: %w", tlsRefusal(err))
		}
	}
}

// makeRoom makes the buffer able to hold need bytes from fr.start, compacting or growing.
func (fr *frameReader) makeRoom(need int) {
	need = max(need, minReadBuf)
	switch {
	case need > len(fr.buf):
		buf := make([]byte, max(need, 2*len(fr.buf)))
		fr.end = copy(buf, fr.buf[fr.start:fr.end])
		fr.buf, fr.start = buf, 0
	case fr.start+need > len(fr.buf) || fr.start == fr.end:
		fr.end = copy(fr.buf, fr.buf[fr.start:fr.end])
		fr.start = 0
	}
}

// dial connects to addr within the dial timeout and the context, and authenticates
// when the client has credentials (Auth): every connection the client makes comes from
// here.
func dial(ctx context.Context, c *cfg, addr string) (net.Conn, error) {
	nc, err := connect(ctx, c, addr)
	if err != nil || c.user == "" {
		return nc, err
	}
	if err := authenticate(ctx, c, nc, addr); err != nil {
		nc.Close()
		return nil, err
	}
	return nc, nil
}

// connect makes the connection, with TLS when configured.
func connect(ctx context.Context, c *cfg, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: c.dialTimeout}
	if c.tls != nil {
		return dialTLS(ctx, c, &d, addr)
	}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to %s: %w", addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	return nc, nil
}

// dialTLS connects with TLS (the handshake within the dial timeout); the server name
// is the address's host unless the configuration names one.
func dialTLS(ctx context.Context, c *cfg, d *net.Dialer, addr string) (net.Conn, error) {
	conf := c.tls.Clone()
	if conf.ServerName == "" {
		conf.ServerName, _, _ = net.SplitHostPort(addr)
	}
	td := tls.Dialer{NetDialer: d, Config: conf}
	nc, err := td.DialContext(ctx, "tcp", addr)
	var (
		rh tls.RecordHeaderError
		cv *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &rh):
		return nil, fmt.Errorf("cannot connect to %s with TLS: it answered in plaintext (TLS is not on for this port?): %w: %w", addr, ErrTLSMismatch, err)
	case errors.As(err, &cv):
		return nil, fmt.Errorf("cannot connect to %s with TLS: its certificate was refused: %w: %w", addr, ErrTLSMismatch, err)
	case err != nil:
		return nil, fmt.Errorf("cannot connect to %s with TLS: %w", addr, tlsRefusal(err))
	}
	return nc, nil
}

// tlsRefusal marks err with ErrTLSMismatch when it is a TLS alert the broker sent
// (crypto/tls reports one as a *net.OpError whose Op is "remote error"): the broker
// refused this client's TLS (its certificate, none given, a version it does not take),
// which no reconnection cures. With TLS 1.3 a refused client certificate shows up on the
// first read after a handshake that looked complete, so readers pass their errors here.
func tlsRefusal(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" {
		return fmt.Errorf("the broker refused this client's TLS: %w: %w", ErrTLSMismatch, err)
	}
	return err
}

// rpcConn is a connection used synchronously: requests are written, possibly several
// before reading (pipelining), and answers read in order by the same goroutine. It is
// used by one goroutine at a time.
type rpcConn struct {
	nc     net.Conn
	fr     frameReader
	wbuf   []byte
	nextID uint32
	sent   []wire.RequestHeader // the requests without an answer, oldest first
	resp   wire.Response
}

func dialRPC(ctx context.Context, c *cfg, addr string) (*rpcConn, error) {
	nc, err := dial(ctx, c, addr)
	if err != nil {
		return nil, err
	}
	return &rpcConn{nc: nc, fr: frameReader{r: nc, maxFrame: c.maxFrame}}, nil
}

// queue appends a request to the write buffer; flush sends it.
func (rc *rpcConn) queue(body wire.Body) {
	rc.nextID++
	hdr := wire.RequestHeader{APIKey: body.Key(), RequestID: rc.nextID}
	start := len(rc.wbuf)
	rc.wbuf = wire.AppendRequestHeader(rc.wbuf, hdr)
	rc.wbuf = body.AppendTo(rc.wbuf)
	wire.FinishFrame(rc.wbuf, start)
	rc.sent = append(rc.sent, hdr)
}

// flush writes the queued requests.
func (rc *rpcConn) flush(ctx context.Context) error {
	defer rc.deadline(ctx)()
	_, err := rc.nc.Write(rc.wbuf)
	rc.wbuf = rc.wbuf[:0]
	if err != nil {
		return fmt.Errorf("cannot send request: %w", ctxErr(ctx, err))
	}
	return nil
}

// read returns the answer to the oldest request without one. The response and what its
// body aliases are valid until the next read.
func (rc *rpcConn) read(ctx context.Context) (*wire.Response, error) {
	if len(rc.sent) == 0 {
		panic("BUG: read without a request")
	}
	defer rc.deadline(ctx)()
	frame, err := rc.fr.next()
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	if _, err := rc.resp.Decode(frame, rc.fr.maxFrame); err != nil {
		return nil, fmt.Errorf("cannot decode answer: %w", err)
	}
	// An answer is decoded by the API key it carries: one that names another request's
	// key would hand its caller a body of the wrong type.
	if h, want := rc.resp.Header, rc.sent[0]; h.RequestID != want.RequestID || h.APIKey != want.APIKey {
		return nil, fmt.Errorf("cannot match answer: id %d of %v, want id %d of %v", h.RequestID, h.APIKey, want.RequestID, want.APIKey)
	}
	rc.sent = rc.sent[1:]
	return &rc.resp, nil
}

// call sends one request and reads its answer.
func (rc *rpcConn) call(ctx context.Context, body wire.Body) (*wire.Response, error) {
	rc.queue(body)
	if err := rc.flush(ctx); err != nil {
		return nil, err
	}
	return rc.read(ctx)
}

// deadline makes the connection's I/O end when ctx does; call the result when done.
func (rc *rpcConn) deadline(ctx context.Context) func() {
	if d, ok := ctx.Deadline(); ok {
		rc.nc.SetDeadline(d)
	}
	if ctx.Done() == nil {
		return func() {}
	}
	stop := context.AfterFunc(ctx, func() { rc.nc.SetDeadline(time.Unix(1, 0)) })
	return func() {
		stop()
		rc.nc.SetDeadline(time.Time{})
	}
}

func (rc *rpcConn) close() error { return rc.nc.Close() }

// ctxErr prefers the context's error to the I/O error its deadline caused (the socket's
// deadline may fire just before the context's own timer).
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if d, ok := ctx.Deadline(); ok && errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return err
}
