package tlsfront

import (
	"crypto/tls"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// writeSelfSigned writes a self-signed certificate for 127.0.0.1 and its key into dir.
func writeSelfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeCert(t, certFile, keyFile, 1)
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
