package tlsfront

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// loaded is what one load of the files gave: the configuration new handshakes use and
// the serving certificate (the chain's first), whose validity Stats reports.
type loaded struct {
	conf *tls.Config
	leaf *x509.Certificate
}

// Reload reads the certificate, key and client CAs again: new handshakes use them,
// connections already open keep theirs. A file that cannot be read or does not parse,
// or a certificate that has expired or is not valid yet, leaves the current ones in
// place and is the error (at Start: the front does not start).
func (f *Front) Reload() error {
	l, err := load(f.cfg, time.Now())
	if err != nil {
		f.reloadsFailed.Add(1)
		return err
	}
	f.tls.Store(l)
	f.reloadsOK.Add(1)
	f.cfg.Logger.Info("TLS certificate loaded", "cert", f.cfg.CertFile, "subject", l.leaf.Subject.String(),
		"serial", l.leaf.SerialNumber.String(), "not_after", l.leaf.NotAfter.UTC().Format(time.RFC3339))
	return nil
}

// load reads the files of cfg and checks the certificate is valid at now.
func load(cfg Config, now time.Time) (*loaded, error) {
	cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("cannot load the TLS certificate %s and key %s: %w", cfg.CertFile, cfg.KeyFile, err)
	}
	leaf := cert.Leaf
	if leaf == nil { // LoadX509KeyPair fills it in; parse it when it did not
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("cannot parse the TLS certificate %s: %w", cfg.CertFile, err)
		}
	}
	if err := checkValidity(leaf, now); err != nil {
		return nil, fmt.Errorf("cannot serve the TLS certificate %s: %w", cfg.CertFile, err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if cfg.ClientCAFile != "" {
		pem, err := os.ReadFile(cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("cannot read the client CAs: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no PEM certificate in the client CA file %s", cfg.ClientCAFile)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return &loaded{conf: c, leaf: leaf}, nil
}

// checkValidity refuses a certificate every client would refuse at now: expired, or
// not valid yet (a renewal installed early, a clock set wrong).
func checkValidity(leaf *x509.Certificate, now time.Time) error {
	switch {
	case now.After(leaf.NotAfter):
		return fmt.Errorf("it expired at %s (%v ago): every client would refuse it",
			leaf.NotAfter.UTC().Format(time.RFC3339), now.Sub(leaf.NotAfter).Round(time.Second))
	case now.Before(leaf.NotBefore):
		return fmt.Errorf("it is not valid before %s (in %v; is this host's clock right?): every client would refuse it",
			leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotBefore.Sub(now).Round(time.Second))
	}
	return nil
}

// every lets one event of a kind through at most once per interval, and counts those it
// held back: how the front logs what a client can make happen at any rate (refused
// connections, failed handshakes) without letting it flood the log. Safe for concurrent
// use.
type every struct {
	last atomic.Int64  // unix ns of the last event let through
	held atomic.Uint64 // events held back since
}

// allow reports whether an event at now goes through, and how many were held back
// before it (then reset).
func (e *every) allow(now time.Time, interval time.Duration) (ok bool, held uint64) {
	ns, last := now.UnixNano(), e.last.Load()
	if (last != 0 && ns-last < int64(interval)) || !e.last.CompareAndSwap(last, ns) {
		e.held.Add(1)
		return false, 0
	}
	return true, e.held.Swap(0)
}
