package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"sluice/netio"
	"sluice/netio/tlsfront"
)

// TLSConfig turns TLS on for the broker's listener: the event loops then listen on a
// unix socket in the data directory, and a TLS front (netio/tlsfront) serves the public
// address and relays to them. Without CertFile nothing changes.
type TLSConfig struct {
	CertFile, KeyFile string // tls.cert, tls.key (PEM)
	ClientCAFile      string // tls.client_ca: require client certificates signed by these CAs
}

// Enabled reports whether the listener speaks TLS.
func (c *TLSConfig) Enabled() bool { return c.CertFile != "" }

// socketName is the event loops' unix socket in the data directory behind a TLS front.
// '+' is never in a topic name.
const socketName = "+loops.sock"

// startNet starts the event loops, and with TLS on the front before them.
func (b *Broker) startNet() error {
	cfg := b.cfg.Net
	if !b.cfg.TLS.Enabled() {
		var err error
		b.net, err = netio.Start(cfg, b)
		return err
	}
	sock := filepath.Join(b.cfg.DataDir, socketName)
	if err := os.Remove(sock); err != nil && !os.IsNotExist(err) { // a crash's leftover (the data directory is locked)
		return fmt.Errorf("cannot remove the old socket %s: %w", sock, err)
	}
	cfg.Network, cfg.Listen = "unix", sock
	n, err := netio.Start(cfg, b)
	if err != nil {
		return err
	}
	if err := os.Chmod(sock, 0o600); err != nil { // only the broker's user bypasses TLS
		stopNow(n)
		return fmt.Errorf("cannot restrict the socket %s: %w", sock, err)
	}
	front, err := tlsfront.Start(tlsfront.Config{Listen: b.cfg.Net.Listen, CertFile: b.cfg.TLS.CertFile,
		KeyFile: b.cfg.TLS.KeyFile, ClientCAFile: b.cfg.TLS.ClientCAFile, MaxConns: tlsConnLimit(b.fdLimit),
		Logger: b.cfg.Logger}, sock)
	if err != nil {
		stopNow(n)
		return err
	}
	b.net, b.front = n, front
	addr := front.Addr()
	b.addr.Store(&addr)
	return nil
}

// ReloadTLS reads the TLS certificate, key and client CAs again (SIGHUP): new
// connections use them, open ones keep theirs (the front logs what it loaded). Files
// that do not load, or a certificate expired or not valid yet, leave the serving one in
// place and are the error. Without TLS it does nothing.
func (b *Broker) ReloadTLS() error {
	if b.front == nil {
		return nil
	}
	return b.front.Reload()
}

// stopNow stops event loops that serve nobody yet.
func stopNow(n *netio.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownFlushWait)
	defer cancel()
	n.Stop(ctx)
}

// tlsConnLimit bounds the TLS front's connections by the file limit: each holds three
// descriptors (the client's socket and both ends of its unix socket), and half the limit
// is left to the partitions' files (partitionLimit).
func tlsConnLimit(fdLimit int) int { return max(fdLimit/6, 16) }
