package netio

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync/atomic"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"sluice/wire"
)

// Handler serves decoded requests. Handle runs on the connection's event loop and must not
// block; the request and its byte fields are valid only during the call (copy what must
// outlive it, such as a produce request's batches — the one copy of a payload). It
// answers, now or later from any goroutine, with c.Respond(slot, ...), once (a second
// answer to a slot is dropped and its Done run). A panic in Handle is recovered: the
// request is answered with an internal error, and the panic counted and logged.
//
// Serving is called once, with the address the server listens on, before any
// connection is accepted: nothing is served before the handler knows its address.
type Handler interface {
	Serving(addr string)
	Handle(c *Conn, slot Slot, req *wire.Request)
}

// Config configures the server.
type Config struct {
	Listen      string // host:port; port 0 picks one
	Loops       int    // event loops; 0 means one per core
	MaxFrame    int    // largest request frame; default 64 MiB + 1 MiB
	MaxInflight int    // outstanding requests per connection; default 64
	MaxInbound  int    // unread bytes buffered per connection; default 2 * MaxFrame
	Logger      *slog.Logger
}

// EnsureDefaults fills unset fields.
func (c *Config) EnsureDefaults() *Config {
	if c.MaxFrame == 0 {
		c.MaxFrame = 65 << 20
	}
	if c.MaxInflight == 0 {
		c.MaxInflight = 64
	}
	if c.MaxInbound == 0 {
		c.MaxInbound = 2 * c.MaxFrame
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate checks the limits.
func (c *Config) Validate() error {
	if c.MaxFrame < 1<<10 || c.MaxInflight < 1 || c.MaxInbound < c.MaxFrame || c.Loops < 0 {
		return fmt.Errorf("invalid network config: max frame %d, max inflight %d, max inbound %d, loops %d",
			c.MaxFrame, c.MaxInflight, c.MaxInbound, c.Loops)
	}
	return nil
}

// Stats are the server's counters.
type Stats struct {
	Connections   int64
	BytesSendfile uint64 // response bytes sent with sendfile (never in user space)
	BytesCopied   uint64 // response bytes written with writev from user-space buffers
	BytesRead     uint64 // request frame bytes read
	Requests      uint64
	ProtocolErrs  uint64
	WriteWaits    uint64 // times a connection waited for its socket to drain
	Panics        uint64 // panics recovered in Handle, each answered with an internal error
	Released      uint64 // parked requests released early because a later answer was ready
}

type counters struct {
	conns                      atomic.Int64
	bytesSendfile, bytesCopied atomic.Uint64
	bytesRead, requests        atomic.Uint64
	protocolErrs, writeWaits   atomic.Uint64
	panics, released           atomic.Uint64
}

// Server is the gnet engine serving one listener.
type Server struct {
	gnet.BuiltinEventEngine
	cfg     Config
	handler Handler
	eng     gnet.Engine
	addr    chan string
	done    chan error
	stats   counters
}

// Start listens and serves in the background; it returns once the listener is up, with
// its address.
func Start(cfg Config, h Handler) (*Server, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, handler: h, addr: make(chan string, 1), done: make(chan error, 1)}
	opts := []gnet.Option{gnet.WithMulticore(true), gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithReusePort(false), gnet.WithReuseAddr(true), gnet.WithLogLevel(4 /* errors only */)}
	if cfg.Loops > 0 {
		opts = append(opts, gnet.WithNumEventLoop(cfg.Loops))
	}
	go func() { s.done <- gnet.Run(s, "tcp://"+cfg.Listen, opts...) }()
	select {
	case <-s.addr:
		return s, nil
	case err := <-s.done:
		return nil, fmt.Errorf("cannot listen on %s: %w", cfg.Listen, err)
	}
}

// Addr returns the listening address (resolved once serving).
func (s *Server) Addr() string { return s.cfg.Listen }

// Stop closes the listener and every connection and waits for the loops to end.
func (s *Server) Stop(ctx context.Context) error {
	err := s.eng.Stop(ctx)
	select {
	case <-s.done:
	case <-ctx.Done():
	}
	return err
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	return Stats{Connections: s.stats.conns.Load(), BytesSendfile: s.stats.bytesSendfile.Load(),
		BytesCopied: s.stats.bytesCopied.Load(), BytesRead: s.stats.bytesRead.Load(),
		Requests: s.stats.requests.Load(), ProtocolErrs: s.stats.protocolErrs.Load(),
		WriteWaits: s.stats.writeWaits.Load(), Panics: s.stats.panics.Load(),
		Released: s.stats.released.Load()}
}

// OnBoot records the engine and the address it listens on.
func (s *Server) OnBoot(eng gnet.Engine) gnet.Action {
	s.eng = eng
	if fd, err := eng.Dup(); err == nil {
		if sa, err := unix.Getsockname(fd); err == nil {
			if in, ok := sa.(*unix.SockaddrInet4); ok {
				s.cfg.Listen = (&net.TCPAddr{IP: in.Addr[:], Port: in.Port}).String()
			} else if in6, ok := sa.(*unix.SockaddrInet6); ok {
				s.cfg.Listen = (&net.TCPAddr{IP: in6.Addr[:], Port: in6.Port}).String()
			}
		}
		unix.Close(fd)
	}
	s.handler.Serving(s.cfg.Listen) // before the loops start: no connection yet
	s.addr <- s.cfg.Listen
	return gnet.None
}

// OnOpen attaches the connection state.
func (s *Server) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	gc.SetContext(&Conn{gc: gc, srv: s})
	s.stats.conns.Add(1)
	return nil, gnet.None
}

// OnClose releases everything the connection still holds.
func (s *Server) OnClose(gc gnet.Conn, err error) gnet.Action {
	if c, ok := gc.Context().(*Conn); ok {
		c.shutdown()
	}
	s.stats.conns.Add(-1)
	return gnet.None
}

// OnTraffic writes what is ready, then reads frames while the connection has room for
// more requests in flight.
func (s *Server) OnTraffic(gc gnet.Conn) gnet.Action {
	c := gc.Context().(*Conn)
	c.wakePending.Store(false)
	if err := c.flush(); err != nil {
		if !errors.Is(err, errClosing) && !isConnReset(err) {
			s.cfg.Logger.Debug("write failed", "remote", gc.RemoteAddr(), "err", err)
		}
		return gnet.Close
	}
	if c.closeNext {
		return gnet.None // a fatal error is being answered; read nothing more
	}
	for c.inflight() < s.cfg.MaxInflight {
		done, action := s.readFrame(c)
		if done || action != gnet.None {
			return action
		}
	}
	return gnet.None
}

// readFrame reads and dispatches one frame if a whole one is buffered; done reports that
// there is none.
func (s *Server) readFrame(c *Conn) (done bool, action gnet.Action) {
	gc := c.gc
	n := gc.InboundBuffered()
	if n == 0 {
		return true, gnet.None
	}
	buf, _ := gc.Peek(min(n, wire.RequestHeaderSize))
	if len(buf) >= 4 && int64(binary.LittleEndian.Uint32(buf))+4 > int64(s.cfg.MaxFrame) {
		// Refuse an oversized frame from its length field alone, without waiting for a
		// header that a client sending garbage may never complete.
		return true, s.refuse(c, wire.RequestHeader{}, wire.NewError(wire.CodeFrameTooLarge,
			fmt.Sprintf("frame of %d bytes, limit %d", binary.LittleEndian.Uint32(buf)+4, s.cfg.MaxFrame)))
	}
	size, hdr, err := wire.PeekFrame(buf, s.cfg.MaxFrame) // size: the whole frame, length field included
	if err == nil || errors.Is(err, wire.ErrShort) {
		if n < size {
			if n > s.cfg.MaxInbound {
				return true, gnet.Close
			}
			return true, gnet.None // wait for the rest of the frame
		}
		frame, _ := gc.Peek(size)
		var req wire.Request
		if _, err = req.Decode(frame, s.cfg.MaxFrame); err == nil {
			s.stats.requests.Add(1)
			s.stats.bytesRead.Add(uint64(size))
			s.handle(c, c.newSlot(), &req)
			gc.Discard(size)
			return false, gnet.None
		}
		if !wire.CodeOf(err).Fatal() {
			// A whole, well-framed request with a bad field (a topic name, say): answer it
			// and go on reading; only framing errors end the connection.
			s.stats.protocolErrs.Add(1)
			c.Respond(c.newSlot(), Response{Head: wire.AppendErrorResponse(nil, hdr, err), File: -1})
			gc.Discard(size)
			return false, gnet.None
		}
	}
	return true, s.refuse(c, hdr, err)
}

// handle runs the handler on one request. A panic there is a bug in the broker, not a
// reason to stop serving everyone else: it is answered with an internal error (dropped if
// the handler had answered already), counted and logged with its stack.
func (s *Server) handle(c *Conn, sl Slot, req *wire.Request) {
	defer func() {
		if r := recover(); r != nil {
			s.stats.panics.Add(1)
			s.cfg.Logger.Error("panic while handling a request: answered with an internal error",
				"api", req.Header.APIKey.String(), "remote", c.RemoteAddr(), "panic", r, "stack", string(debug.Stack()))
			err := wire.NewError(wire.CodeInternal, fmt.Sprintf("internal error: %v", r))
			c.Respond(sl, Response{Head: wire.AppendErrorResponse(nil, req.Header, err), File: -1})
		}
	}()
	s.handler.Handle(c, sl, req)
}

// refuse answers a frame the server cannot decode with an error frame and closes the
// connection once it is written.
func (s *Server) refuse(c *Conn, hdr wire.RequestHeader, err error) gnet.Action {
	s.stats.protocolErrs.Add(1)
	s.cfg.Logger.Debug("refusing request", "remote", c.gc.RemoteAddr(), "err", err)
	c.closeNext = true
	c.Respond(c.newSlot(), Response{Head: wire.AppendErrorResponse(nil, hdr, err), File: -1, Close: true})
	if ferr := c.flush(); ferr != nil {
		return gnet.Close
	}
	return gnet.None
}
