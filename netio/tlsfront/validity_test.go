package tlsfront

import (
	"bytes"
	"crypto/tls"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCertificateValidity: a front does not start on a certificate that has expired or
// is not valid yet (every client would refuse it), and a reload of one is refused with
// the serving certificate left in place, counted and its expiry unchanged in Stats. Before,
// both were taken, and every handshake failed until the next good reload.
func TestCertificateValidity(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	now := time.Now()
	bad := map[string][2]time.Time{
		"expired":          {now.Add(-2 * time.Hour), now.Add(-time.Hour)},
		"not valid before": {now.Add(time.Hour), now.Add(2 * time.Hour)},
	}
	for want, valid := range bad {
		writeCertValid(t, certFile, keyFile, 2, valid[0], valid[1])
		if f, err := Start(Config{Listen: "127.0.0.1:0", CertFile: certFile, KeyFile: keyFile}, filepath.Join(dir, "none.sock")); err == nil ||
			!strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), certFile) {
			if f != nil {
				f.Stop()
			}
			t.Fatalf("start on a certificate %s: %v", want, err)
		}
	}

	notAfter := now.Add(3 * time.Hour).Truncate(time.Second)
	writeCertValid(t, certFile, keyFile, 1, now.Add(-time.Hour), notAfter)
	f := startFront(t, Config{CertFile: certFile, KeyFile: keyFile})
	for want, valid := range bad {
		writeCertValid(t, certFile, keyFile, 2, valid[0], valid[1])
		if err := f.Reload(); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("a reload of a certificate %s: %v", want, err)
		}
		c, err := tls.Dial("tcp", f.Addr(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatalf("after a refused reload: %v", err)
		}
		if serial := c.ConnectionState().PeerCertificates[0].SerialNumber.Int64(); serial != 1 {
			t.Fatalf("after a refused reload of a certificate %s: serving serial %d, want 1", want, serial)
		}
		c.Close()
	}
	if st := f.Stats(); !st.NotAfter.Equal(notAfter) || st.ReloadsOK != 1 || st.ReloadsFailed != 2 {
		t.Fatalf("stats %+v: want not after %v, 1 load and 2 refused", st, notAfter)
	}
}

// TestHandshakeFailureLogged: a failed handshake is logged at warning level with the
// client's address and crypto/tls's reason (it was at debug level: an operator never
// saw a client with the wrong CA), never key material.
func TestHandshakeFailureLogged(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writeSelfSigned(t, dir)
	logs := &lockedBuffer{}
	f := startFront(t, Config{CertFile: certFile, KeyFile: keyFile, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	for range 3 {
		// The client trusts nobody: it refuses the front's certificate, and the front's
		// handshake fails on its alert.
		if c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", f.Addr(), &tls.Config{}); err == nil {
			c.Close()
			t.Fatal("a client trusting nobody completed a handshake")
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.Stats().Failed < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v: want 3 failed", f.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	log := logs.String()
	if !strings.Contains(log, `level=WARN msg="TLS handshake failed" remote=127.0.0.1:`) || !strings.Contains(log, "bad certificate") {
		t.Fatalf("no warning of the failed handshakes:\n%s", log)
	}
	if strings.Count(log, "TLS handshake failed") > 3 || strings.Contains(log, "PRIVATE KEY") {
		t.Fatalf("the log:\n%s", log)
	}
}

// TestEvery: one event per interval goes through, with the count of those held back
// since the last.
func TestEvery(t *testing.T) {
	var e every
	t0 := time.Unix(1000, 0)
	f := func(at time.Duration, wantOK bool, wantHeld uint64) {
		t.Helper()
		if ok, held := e.allow(t0.Add(at), 10*time.Second); ok != wantOK || held != wantHeld {
			t.Fatalf("at %v: %v %d, want %v %d", at, ok, held, wantOK, wantHeld)
		}
	}
	f(0, true, 0)
	f(time.Second, false, 0)
	f(9*time.Second, false, 0)
	f(10*time.Second, true, 2)
	f(25*time.Second, true, 0)
}

// lockedBuffer is a buffer a logger on the front's goroutines and the test share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
