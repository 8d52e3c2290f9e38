package netio

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"sluice/wire"
)

// Handler serves decoded requests. Handle runs on the connection's event loop and must not
// block; the request and its byte fields are valid only during the call (copy what must
// outlive it, such as a produce request's batches — the one copy of a payload: the
// frame's memory is reused, or unmapped, once Handle returns). A fetch request's MaxBytes
// may have been lowered to its connection's room in the outbound budget. It
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

// Opener is a Handler that hears of each new connection: Opened runs on the connection's
// loop before any of its bytes is read (to set its state or LimitFrames). It must not
// block.
type Opener interface {
	Opened(c *Conn)
}

// Waiter is a Handler that runs something on an event loop after each of its callbacks
// (a readable event, a close), before the loop goes back to gnet, which may block in
// epoll_wait holding its processor: the broker yields there to the shards its handlers
// woke (sched.Scheduler.HandOff says why). It must not block.
type Waiter interface {
	BeforeWait()
}

// Config configures the server. The budgets are what the broker may hold for its
// clients; DESIGN §7 and the package comment say why they are enforced the way they are.
type Config struct {
	Listen string // host:port; port 0 picks one (a socket path when Network is unix)
	// Network is "tcp" (the default) or "unix": behind a TLS front (netio/tlsfront) the
	// event loops listen on a unix socket only the broker's user can reach.
	Network     string
	Loops       int // event loops; 0 means one per core
	MaxFrame    int // largest request frame; default 64 MiB + 1 MiB
	MaxInflight int // outstanding requests per connection; default 64
	// MaxInbound caps the bytes one connection may have read but not yet handed to the
	// handler (a partial frame, and frames waiting while it may take no more requests);
	// default 2 * MaxFrame. The budget's large half (MaxInboundTotal/2) caps it too.
	MaxInbound int
	// MaxInboundTotal bounds those bytes over all connections (net.max_inbound_total);
	// default 256 MiB. At least 2 * MaxFrame: half of it is kept for small holdings.
	MaxInboundTotal int64
	// MaxOutboundTotal bounds the memory held by answers not yet written, over all
	// connections (net.max_outbound_total); default 256 MiB.
	MaxOutboundTotal int64
	// MaxOutbound is one connection's share of MaxOutboundTotal (net.max_outbound): past
	// it the connection takes no further fetches until its answers are read; default
	// MaxOutboundTotal / 8.
	MaxOutbound int64
	// FrameTimeout closes a connection whose partial frame receives no byte for this long
	// (net.frame_timeout), and one that has not taken the error it is being closed with
	// within it; default 30 s.
	FrameTimeout time.Duration
	// SendTimeout closes a connection whose socket takes no byte of its answers for this
	// long (net.send_timeout; nginx's send_timeout): a client that stopped reading. Its
	// answers go with it, and with them what they hold: arena chunks, and the files of
	// segments retention has deleted, whose disk space a sendfile answer keeps until it
	// is written or dropped. Default 60 s; negative: never.
	SendTimeout time.Duration
	Logger      *slog.Logger

	// afterFlush, tests only, runs when a writer's flush is done, before it lets go of
	// the connection's writer lock: what a test does there happens after the flush's
	// last look at the queue (send_test.go).
	afterFlush func()
}

// Defaults of the budgets.
const (
	DefaultMaxInboundTotal  = 256 << 20
	DefaultMaxOutboundTotal = 256 << 20
	DefaultFrameTimeout     = 30 * time.Second
	DefaultSendTimeout      = time.Minute
)

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
	if c.MaxInboundTotal == 0 {
		c.MaxInboundTotal = DefaultMaxInboundTotal
	}
	if c.MaxOutboundTotal == 0 {
		c.MaxOutboundTotal = DefaultMaxOutboundTotal
	}
	if c.MaxOutbound == 0 {
		c.MaxOutbound = c.MaxOutboundTotal / 8
	}
	if c.FrameTimeout == 0 {
		c.FrameTimeout = DefaultFrameTimeout
	}
	if c.SendTimeout == 0 {
		c.SendTimeout = DefaultSendTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate checks the limits.
func (c *Config) Validate() error {
	var errs []error
	if c.MaxFrame < 1<<10 || c.MaxInflight < 1 || c.MaxInbound < c.MaxFrame || c.Loops < 0 {
		errs = append(errs, fmt.Errorf("max frame %d (at least 1 KiB), max inflight %d, max inbound %d (at least max frame), loops %d",
			c.MaxFrame, c.MaxInflight, c.MaxInbound, c.Loops))
	}
	if c.MaxInboundTotal < 2*int64(c.MaxFrame) {
		errs = append(errs, fmt.Errorf("net.max_inbound_total %d below twice the max frame (%d): half of it is kept for small requests",
			c.MaxInboundTotal, 2*c.MaxFrame))
	}
	if c.MaxOutbound < 64<<10 || c.MaxOutbound > c.MaxOutboundTotal {
		errs = append(errs, fmt.Errorf("net.max_outbound %d not in [64 KiB, net.max_outbound_total %d]", c.MaxOutbound, c.MaxOutboundTotal))
	}
	if c.FrameTimeout < time.Millisecond {
		errs = append(errs, fmt.Errorf("net.frame_timeout %v below 1ms", c.FrameTimeout))
	}
	if c.SendTimeout >= 0 && c.SendTimeout < time.Millisecond {
		errs = append(errs, fmt.Errorf("net.send_timeout %v below 1ms (negative: never)", c.SendTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid network config: %w", err)
	}
	return nil
}

// String renders the limits for the startup log.
func (c *Config) String() string {
	return fmt.Sprintf("max_frame=%d max_inflight=%d max_inbound=%d max_inbound_total=%d max_outbound=%d max_outbound_total=%d frame_timeout=%v",
		c.MaxFrame, c.MaxInflight, c.MaxInbound, c.MaxInboundTotal, c.MaxOutbound, c.MaxOutboundTotal, c.FrameTimeout)
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
	BytesHeld     uint64 // request bytes copied into connections' own buffers (frames cut by a read)
	BytesReceived uint64 // request bytes netio read from sockets itself, straight into those buffers
	Panics        uint64 // panics recovered in Handle, each answered with an internal error
	Released      uint64 // parked requests released early because a later answer was ready

	InboundBuffered int64 // bytes read and held, not yet handed to the handler (the budget's charge)
	InboundIdle     int64 // idle inbound buffer memory kept for reuse (at most MaxInboundTotal/16, 16 MiB)
	OutboundQueued  int64 // bytes of answers ready and not yet written (Head and Iov)
	// OutboundReserved is what fetches taken and not yet answered may answer (MaxBytes).
	OutboundReserved int64
	RefusedBudget    uint64 // connections refused because the inbound budget was spent
	RefusedConnLimit uint64 // connections refused for holding more than MaxInbound
	FramesTimedOut   uint64 // connections closed because a partial frame made no progress
	SendsTimedOut    uint64 // connections closed because their socket took nothing for SendTimeout
	Expired          uint64 // connections closed by their expiry (Conn.Expire)
	PausedInflight   uint64 // times a connection stopped taking requests at MaxInflight
	PausedOutbound   uint64 // times a connection stopped taking fetches for its unread answers
	FetchesClamped   uint64 // fetches whose MaxBytes was lowered to the outbound room left
	// DirectWrites counts answers written by the goroutine that made them (or by one
	// that made an answer behind them), LoopWrites those written by the connection's
	// loop (send.go).
	DirectWrites, LoopWrites uint64
}

type counters struct {
	conns                      atomic.Int64
	bytesSendfile, bytesCopied atomic.Uint64
	bytesRead, requests        atomic.Uint64
	protocolErrs, writeWaits   atomic.Uint64
	panics, released           atomic.Uint64
	bytesHeld, bytesReceived   atomic.Uint64
	timedOut, expired          atomic.Uint64
	sendTimedOut               atomic.Uint64
	pausedInflight             atomic.Uint64
	pausedOutbound             atomic.Uint64
	directWrites, loopWrites   atomic.Uint64
}

// Server is the gnet engine serving one listener.
type Server struct {
	gnet.BuiltinEventEngine
	cfg       Config
	handler   Handler
	waiter    Waiter // the handler's, or nil
	eng       gnet.Engine
	addr      chan string
	done      chan error
	stats     counters
	inBudget  *inboundBudget
	outBudget outboundBudget
	bufs      bufPool // inbound buffers of every connection
	drain     drainState
}

// Start listens and serves in the background; it returns once the listener is up, with
// its address.
func Start(cfg Config, h Handler) (*Server, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, handler: h, addr: make(chan string, 1), done: make(chan error, 1), inBudget: newInboundBudget(&cfg)}
	s.waiter, _ = h.(Waiter)
	s.outBudget.limit, s.outBudget.connMax = cfg.MaxOutboundTotal, cfg.MaxOutbound
	s.bufs.retain = min(cfg.MaxInboundTotal/16, 16<<20)
	opts := []gnet.Option{gnet.WithMulticore(true), gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithReusePort(false), gnet.WithReuseAddr(true), gnet.WithLogLevel(4 /* errors only */),
		gnet.WithReadBufferCap(gnetReadCap)} // receive.go says why so small
	if cfg.Loops > 0 {
		opts = append(opts, gnet.WithNumEventLoop(cfg.Loops))
	}
	network := cfg.Network
	if network == "" {
		network = "tcp"
	}
	go func() { s.done <- gnet.Run(s, network+"://"+cfg.Listen, opts...) }()
	select {
	case <-s.addr:
		return s, nil
	case err := <-s.done:
		s.bufs.close()
		return nil, fmt.Errorf("cannot listen on %s: %w", cfg.Listen, err)
	}
}

// Addr returns the listening address (resolved once serving).
func (s *Server) Addr() string { return s.cfg.Listen }

// Stop closes the listener and every connection and waits for the loops to end; then it
// unmaps the idle inbound buffers.
func (s *Server) Stop(ctx context.Context) error {
	err := s.eng.Stop(ctx)
	select {
	case <-s.done:
		s.bufs.close()
	case <-ctx.Done():
	}
	return err
}

// Stats returns the counters.
func (s *Server) Stats() Stats {
	return Stats{Connections: s.stats.conns.Load(), BytesSendfile: s.stats.bytesSendfile.Load(),
		BytesCopied: s.stats.bytesCopied.Load(), BytesRead: s.stats.bytesRead.Load(),
		Requests: s.stats.requests.Load(), ProtocolErrs: s.stats.protocolErrs.Load(),
		WriteWaits: s.stats.writeWaits.Load(), Panics: s.stats.panics.Load(), BytesHeld: s.stats.bytesHeld.Load(),
		BytesReceived: s.stats.bytesReceived.Load(),
		Released:      s.stats.released.Load(), InboundBuffered: s.inBudget.held(), InboundIdle: s.bufs.idle(),
		OutboundQueued: s.outBudget.queued.Load(), OutboundReserved: s.outBudget.reserved.Load(),
		RefusedBudget: s.inBudget.refusedBudget.Load(), RefusedConnLimit: s.inBudget.refusedConn.Load(),
		FramesTimedOut: s.stats.timedOut.Load(), SendsTimedOut: s.stats.sendTimedOut.Load(), Expired: s.stats.expired.Load(), PausedInflight: s.stats.pausedInflight.Load(),
		PausedOutbound: s.stats.pausedOutbound.Load(), FetchesClamped: s.outBudget.clamped.Load(),
		DirectWrites: s.stats.directWrites.Load(), LoopWrites: s.stats.loopWrites.Load()}
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
	c := &Conn{gc: gc, srv: s}
	if a := gc.RemoteAddr(); a != nil {
		c.remote = a.String()
	}
	gc.SetContext(c)
	s.stats.conns.Add(1)
	if o, ok := s.handler.(Opener); ok {
		o.Opened(c)
	}
	return nil, gnet.None
}

// OnClose releases everything the connection still holds.
func (s *Server) OnClose(gc gnet.Conn, err error) gnet.Action {
	if c, ok := gc.Context().(*Conn); ok {
		c.shutdown()
	}
	s.stats.conns.Add(-1)
	s.beforeWait()
	return gnet.None
}

// beforeWait runs the handler's BeforeWait, if it has one. Loop only.
func (s *Server) beforeWait() {
	if s.waiter != nil {
		s.waiter.BeforeWait()
	}
}

// handle runs the handler on one request. A panic there is a bug in the broker, not a
// reason to stop serving everyone else: it is answered with an internal error (dropped if
// the handler had answered already), counted and logged with its stack.
func (s *Server) handle(c *Conn, sl Slot, req *wire.Request) {
	if !s.enter() {
		c.Respond(sl, Response{Head: wire.AppendErrorResponse(nil, req.Header, errDraining), File: -1})
		return
	}
	defer s.leave() // last: the recovery below answers as part of the handling
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
