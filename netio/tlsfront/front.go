// Package tlsfront terminates TLS in front of the broker's event loops. gnet, which runs
// them, has no TLS, and crypto/tls needs a blocking net.Conn; so with TLS on, the event
// loops listen on a unix socket only the broker's user can reach, and the front accepts
// clients on the public address, does the handshake with crypto/tls (TLS 1.2 and 1.3,
// certificates from files, reloaded without dropping connections) and relays each
// connection's bytes to the event loops over the socket.
//
// What it costs: two goroutines and two copies per relayed byte in user space (the
// plaintext side over the unix socket, and crypto/tls's encryption), and fetches lose
// sendfile's zero copy: the kernel splices segment data into the unix socket, the front
// reads and encrypts it. Kernel TLS (TCP_ULP "tls") would keep sendfile, but crypto/tls
// neither exports the session keys kTLS needs nor hands its record state over;
// BENCHMARKS.md measures TLS against plaintext.
//
// A plaintext client on the TLS port gets one sluice error frame (tls_required) naming
// the problem, then the connection closes. A failed handshake is logged at warning
// level, at most once per 10 s. A certificate expired or not valid yet is refused at
// Start and by Reload, which then keeps the one serving (certs.go).
//
// On Linux the front's end of each unix socket connection is named after the client's
// address (dialBackend), so the event loops log who a connection is.
package tlsfront

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"sluice/wire"
)

// Config configures the front.
type Config struct {
	Listen   string // the public address, host:port
	CertFile string // PEM certificate chain (tls.cert)
	KeyFile  string // PEM private key (tls.key)
	// ClientCAFile, when set, makes the front require a client certificate signed by
	// one of its CAs (tls.client_ca).
	ClientCAFile string
	// HandshakeTimeout bounds the handshake (and reading the first bytes). Default 10 s.
	HandshakeTimeout time.Duration
	// MaxConns bounds the client connections open at once, handshaking or relayed
	// (each holds three file descriptors of the broker's: the client's socket and both
	// ends of its unix socket); 0: no bound. A connection beyond it is closed as soon as
	// it is accepted (Stats.Refused), so that a flood of connections cannot take the
	// descriptors the partitions' files need.
	MaxConns int
	Logger   *slog.Logger
}

// Stats are the front's counters, and the serving certificate's validity.
type Stats struct {
	Handshakes uint64 // completed
	Failed     uint64 // handshakes that failed (bad certificate, wrong version, timeout...)
	Plaintext  uint64 // plaintext clients answered tls_required
	Relayed    uint64 // connections being relayed now
	Refused    uint64 // connections closed at once: MaxConns were open
	// ReloadsOK and ReloadsFailed count loads of the files (the one at Start too);
	// a failed one left the certificate that was serving.
	ReloadsOK, ReloadsFailed uint64
	// NotAfter is when the serving certificate expires.
	NotAfter time.Time
}

// Front is a running TLS front.
type Front struct {
	cfg     Config
	backend string // the event loops' unix socket
	ln      net.Listener
	tls     atomic.Pointer[loaded] // the current certificates; swapped by Reload
	wg      sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{} // open client connections, closed by Stop
	done  bool

	tag string        // random, in every backend socket name (dialBackend)
	seq atomic.Uint64 // numbers the backend socket names

	handshakes, failed, plaintext, refused atomic.Uint64
	reloadsOK, reloadsFailed               atomic.Uint64
	relayed                                atomic.Int64
	refusedLog, failedLog                  every // rate limits of their log lines
}

// Start loads the certificates, listens on cfg.Listen and relays every TLS connection to
// the unix socket backend.
func Start(cfg Config, backend string) (*Front, error) {
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	tag := make([]byte, 6)
	if _, err := rand.Read(tag); err != nil {
		return nil, fmt.Errorf("cannot make the TLS front's socket tag: %w", err)
	}
	f := &Front{cfg: cfg, backend: backend, conns: map[net.Conn]struct{}{}, tag: hex.EncodeToString(tag)}
	if err := f.Reload(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("cannot listen for TLS on %s: %w", cfg.Listen, err)
	}
	f.ln = ln
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

// Addr returns the address the front listens on.
func (f *Front) Addr() string { return f.ln.Addr().String() }

// Stop closes the listener and every connection and waits for the relays to end.
func (f *Front) Stop() {
	f.ln.Close()
	f.mu.Lock()
	f.done = true
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// Stats returns the counters.
func (f *Front) Stats() Stats {
	return Stats{Handshakes: f.handshakes.Load(), Failed: f.failed.Load(), Plaintext: f.plaintext.Load(),
		Relayed: uint64(max(f.relayed.Load(), 0)), Refused: f.refused.Load(), ReloadsOK: f.reloadsOK.Load(),
		ReloadsFailed: f.reloadsFailed.Load(), NotAfter: f.tls.Load().leaf.NotAfter}
}

func (f *Front) accept() {
	defer f.wg.Done()
	backoff := time.Duration(0)
	for {
		c, err := f.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of file descriptors, a connection reset before it was accepted: the
			// listener is still good. Wait a little and go on, as net/http does, rather
			// than stop taking connections for good.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			f.cfg.Logger.Error("TLS front: accept failed: retrying", "err", err, "in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		ok, full := f.track(c, true)
		if full {
			f.refuse() // counted before the client can see the close
			c.Close()
			continue
		}
		if !ok {
			c.Close()
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer f.track(c, false)
			defer c.Close()
			f.serve(c)
		}()
	}
}

// track adds or removes a connection Stop must close; ok is false once Stop has begun,
// full when MaxConns are open already (then c is not added).
func (f *Front) track(c net.Conn, add bool) (ok, full bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !add {
		delete(f.conns, c)
		return true, false
	}
	if f.done {
		return false, false
	}
	if f.cfg.MaxConns > 0 && len(f.conns) >= f.cfg.MaxConns {
		return true, true
	}
	f.conns[c] = struct{}{}
	return true, false
}

// refuse counts a connection closed because MaxConns were open, and logs it at most
// once a second.
func (f *Front) refuse() {
	f.refused.Add(1)
	if ok, _ := f.refusedLog.allow(time.Now(), time.Second); ok {
		f.cfg.Logger.Warn("TLS front: connection limit reached: closing new connections", "max_conns", f.cfg.MaxConns,
			"refused_total", f.refused.Load())
	}
}

// handshakeFailed counts a failed handshake and logs it at warning level, at most once
// per failedLogInterval (with how many failed since the last line): a client with the
// wrong CA or an expired certificate fails every time it tries, and a scan of the port
// may fail thousands of times. crypto/tls's errors name the problem ("bad certificate",
// "client didn't provide a certificate", a protocol version) and hold no secret.
func (f *Front) handshakeFailed(remote net.Addr, err error) {
	f.failed.Add(1)
	if ok, held := f.failedLog.allow(time.Now(), failedLogInterval); ok {
		f.cfg.Logger.Warn("TLS handshake failed", "remote", remote, "err", err, "not_logged_since_last", held,
			"failed_total", f.failed.Load())
	}
}

// failedLogInterval is the least time between two log lines of failed handshakes.
const failedLogInterval = 10 * time.Second

// serve handshakes one client and relays it; a plaintext client gets tls_required.
func (f *Front) serve(c net.Conn) {
	c.SetDeadline(time.Now().Add(f.cfg.HandshakeTimeout))
	head := make([]byte, wire.RequestHeaderSize)
	n, _ := io.ReadAtLeast(c, head, tlsHeadLen)
	head = head[:n]
	if n < tlsHeadLen {
		f.failed.Add(1)
		return // closed or silent before saying anything
	}
	if !looksLikeTLS(head) {
		f.refusePlaintext(c, head)
		return
	}
	tc := tls.Server(&prefixed{Conn: c, head: head}, f.tls.Load().conf)
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.HandshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		f.handshakeFailed(c.RemoteAddr(), err)
		return
	}
	f.handshakes.Add(1)
	c.SetDeadline(time.Time{})
	back, err := f.dialBackend(c.RemoteAddr())
	if err != nil {
		f.cfg.Logger.Error("TLS front: cannot reach the event loops", "socket", f.backend, "err", err)
		return
	}
	f.relayed.Add(1)
	defer f.relayed.Add(-1)
	relay(tc, back)
}

// dialBackend connects to the event loops for client. On Linux its end of the unix
// socket is bound to an abstract name that starts with the client's address: the event
// loops see that name as the connection's remote address, so what the broker logs of
// the connection (a failed authentication, a refused frame) names the client, not the
// unnamed "@". The front's random tag and a sequence number keep the names unique, also
// from another process's (a name already taken is a failed dial: that connection is
// closed).
func (f *Front) dialBackend(client net.Addr) (*net.UnixConn, error) {
	d := net.Dialer{Timeout: f.cfg.HandshakeTimeout}
	if runtime.GOOS == "linux" {
		suffix := fmt.Sprintf("/tls-%s-%d", f.tag, f.seq.Add(1))
		addr := client.String()
		if room := maxSocketName - 1 - len(suffix); len(addr) > room {
			addr = addr[:room]
		}
		d.LocalAddr = &net.UnixAddr{Name: "@" + addr + suffix, Net: "unix"}
	}
	back, err := d.Dial("unix", f.backend)
	if err != nil {
		return nil, err
	}
	return back.(*net.UnixConn), nil
}

// maxSocketName is the longest unix socket name, with an abstract name's leading '@'.
const maxSocketName = 108

// tlsHeadLen is how much of a connection's start tells TLS from a sluice frame: a TLS
// handshake record (type 22, version 3.x, two length bytes) holding a ClientHello
// (handshake type 1). A sluice frame would need a length of 0x..0x0316 and API key
// bytes that no API has.
const tlsHeadLen = 6

func looksLikeTLS(b []byte) bool {
	return len(b) >= tlsHeadLen && b[0] == 22 && b[1] == 3 && b[5] == 1
}

// refusePlaintext answers a plaintext sluice client with tls_required (its request id
// echoed when its header was read), then lets the connection close.
func (f *Front) refusePlaintext(c net.Conn, head []byte) {
	f.plaintext.Add(1)
	if len(head) < wire.RequestHeaderSize {
		more := make([]byte, wire.RequestHeaderSize-len(head))
		n, _ := io.ReadFull(c, more)
		head = append(head, more[:n]...)
	}
	_, hdr, _ := wire.PeekFrame(head, 1<<31)
	msg := wire.NewError(wire.CodeTLSRequired, "this port speaks TLS: connect with TLS (sluice --tls-ca FILE, client.TLS)")
	c.Write(wire.AppendErrorResponse(nil, hdr, msg))
	f.cfg.Logger.Debug("plaintext client on the TLS port", "remote", c.RemoteAddr())
}

// relay copies both ways until either side ends, then closes both.
func relay(client *tls.Conn, back *net.UnixConn) {
	done := make(chan struct{})
	go func() {
		io.Copy(back, client) // requests
		back.CloseWrite()
		close(done)
	}()
	io.Copy(client, back) // answers
	client.CloseWrite()
	client.Close()
	<-done
	back.Close()
}

// prefixed is a connection whose first bytes were already read.
type prefixed struct {
	net.Conn
	head []byte
}

func (p *prefixed) Read(b []byte) (int, error) {
	if len(p.head) > 0 {
		n := copy(b, p.head)
		p.head = p.head[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}
