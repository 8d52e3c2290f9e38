package tlsfront

import (
	"crypto/tls"
	"io"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestBackendNamesTheClient: the event loops see each relayed connection's remote
// address name the TLS client's address, so what the broker logs of a connection (a
// failed authentication, a refused frame) says who it was, not the unnamed "@" of a
// unix socket.
func TestBackendNamesTheClient(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("abstract unix socket names are Linux's")
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeCert(t, certFile, keyFile, 1)
	sock := filepath.Join(dir, "loops.sock")
	back, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	remotes := make(chan string, 2)
	go func() {
		for {
			c, err := back.Accept()
			if err != nil {
				return
			}
			remotes <- c.RemoteAddr().String()
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	f, err := Start(Config{Listen: "127.0.0.1:0", CertFile: certFile, KeyFile: keyFile}, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	var names []string
	for range 2 { // two connections from the same host: told apart
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", f.Addr(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		select {
		case got := <-remotes:
			if !strings.Contains(got, c.LocalAddr().String()) {
				t.Fatalf("the event loops see the client %s as %q", c.LocalAddr(), got)
			}
			names = append(names, got)
		case <-time.After(10 * time.Second):
			t.Fatal("the front did not relay the connection")
		}
	}
	if names[0] == names[1] {
		t.Fatalf("two clients named alike: %q", names[0])
	}
}
