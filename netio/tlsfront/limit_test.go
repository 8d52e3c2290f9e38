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

// writeSelfSigned writes a self-signed certificate for 127.0.0.1 and its key into dir.
func writeSelfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestConnectionLimit: with MaxConns open, a new connection is closed at once and
// counted; once one closes, a new one is served again.
func TestConnectionLimit(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writeSelfSigned(t, dir)
	sock := filepath.Join(dir, "loops.sock")
	back, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	go func() { // the event loops' stand-in: reads each connection to its end, then closes it
		for {
			c, err := back.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	f, err := Start(Config{Listen: "127.0.0.1:0", CertFile: certFile, KeyFile: keyFile, MaxConns: 1}, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	dial := func() (*tls.Conn, error) {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", f.Addr(), &tls.Config{InsecureSkipVerify: true})
		return c, err
	}
	first, err := dial()
	if err != nil {
		t.Fatalf("the first connection: %v", err)
	}
	if _, err := dial(); err == nil {
		t.Fatal("a connection beyond the limit was served")
	}
	if st := f.Stats(); st.Refused != 1 {
		t.Fatalf("stats %+v: want 1 refused", st)
	}
	first.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := dial()
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection served after the first closed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
