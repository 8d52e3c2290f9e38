package tlsfront

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeCert writes a self-signed certificate for 127.0.0.1 with serial, valid from an
// hour ago for an hour, into certFile and its key into keyFile.
func writeCert(t *testing.T, certFile, keyFile string, serial int64) {
	t.Helper()
	writeCertValid(t, certFile, keyFile, serial, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

// writeCertValid is writeCert with a certificate valid from nb to na.
func writeCertValid(t *testing.T, certFile, keyFile string, serial int64, nb, na time.Time) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), NotBefore: nb, NotAfter: na,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startFront starts a front on certFile and keyFile in front of a backend that reads
// each connection to its end.
func startFront(t *testing.T, cfg Config) *Front {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "loops.sock")
	back, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { back.Close() })
	go func() {
		for {
			c, err := back.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	cfg.Listen = "127.0.0.1:0"
	f, err := Start(cfg, sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	return f
}

// TestReloadKeepsTheCertificate: a reload from a certificate file that does not parse,
// or from a certificate and a key that do not belong together (one replaced before the
// other), is an error and leaves the current certificate serving; a good pair replaces
// it.
func TestReloadKeepsTheCertificate(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeCert(t, certFile, keyFile, 1)
	f := startFront(t, Config{CertFile: certFile, KeyFile: keyFile})
	serial := func() int64 {
		t.Helper()
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", f.Addr(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatalf("handshake: %v", err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	if got := serial(); got != 1 {
		t.Fatalf("serial %d, want 1", got)
	}
	good, _ := os.ReadFile(certFile)
	os.WriteFile(certFile, good[:len(good)/2], 0o600) // torn
	if err := f.Reload(); err == nil {
		t.Fatal("a torn certificate file reloaded")
	}
	if got := serial(); got != 1 {
		t.Fatalf("after a failed reload: serial %d, want the current 1", got)
	}
	other := t.TempDir()
	writeCert(t, filepath.Join(other, "cert.pem"), filepath.Join(other, "key.pem"), 2)
	newCert, _ := os.ReadFile(filepath.Join(other, "cert.pem"))
	os.WriteFile(certFile, newCert, 0o600) // the new certificate, the old key
	if err := f.Reload(); err == nil {
		t.Fatal("a certificate with another certificate's key reloaded")
	}
	if got := serial(); got != 1 {
		t.Fatalf("after a mismatched pair: serial %d, want the current 1", got)
	}
	writeCert(t, certFile, keyFile, 3)
	if err := f.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := serial(); got != 3 {
		t.Fatalf("after a good reload: serial %d, want 3", got)
	}
}

// TestHandshakeTimeout: a client that says nothing, or trickles its ClientHello a byte
// at a time, is closed once HandshakeTimeout has passed since it connected (a deadline
// for the whole handshake, not per read) and counted failed.
func TestHandshakeTimeout(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeCert(t, certFile, keyFile, 1)
	const timeout = 300 * time.Millisecond
	f := startFront(t, Config{CertFile: certFile, KeyFile: keyFile, HandshakeTimeout: timeout})
	closedWithin := func(name string, trickle []byte) {
		t.Helper()
		// Timed from before the dial: the front's clock starts at its accept, which may
		// come before Dial returns here (make test once saw 298.6 ms from after it).
		start := time.Now()
		c, err := net.Dial("tcp", f.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		closed := make(chan time.Duration, 1)
		go func() {
			io.Copy(io.Discard, c) // ends when the front closes
			closed <- time.Since(start)
		}()
		for _, b := range trickle {
			select {
			case took := <-closed:
				if took < timeout {
					t.Fatalf("%s: closed after %v, before the timeout %v", name, took, timeout)
				}
				return
			case <-time.After(timeout / 6):
			}
			c.Write([]byte{b})
		}
		select {
		case took := <-closed:
			if took < timeout {
				t.Fatalf("%s: closed after %v, before the timeout %v", name, took, timeout)
			}
		case <-time.After(10 * timeout):
			t.Fatalf("%s: still open %v after connecting (handshake timeout %v)", name, 10*timeout, timeout)
		}
	}
	closedWithin("a silent client", nil)
	hello := make([]byte, 64) // a handshake record holding a ClientHello, then whatever
	copy(hello, []byte{22, 3, 1, 0, 200, 1})
	closedWithin("a client trickling its ClientHello", hello)
	if st := f.Stats(); st.Failed != 2 || st.Handshakes != 0 {
		t.Fatalf("stats %+v: want 2 failed, no handshake", st)
	}
}
