package tlsfront

import (
	"crypto/tls"
	"io"
	"net"
	"testing"

	"sluice/wire"
)

// TestLooksLikeTLS: a real ClientHello is told from sluice request frames of every API.
func TestLooksLikeTLS(t *testing.T) {
	client, server := net.Pipe()
	go func() {
		tls.Client(client, &tls.Config{InsecureSkipVerify: true}).Handshake() // sends a ClientHello, then fails
	}()
	head := make([]byte, tlsHeadLen)
	if _, err := io.ReadFull(server, head); err != nil {
		t.Fatal(err)
	}
	server.Close()
	if !looksLikeTLS(head) {
		t.Fatalf("a ClientHello % x not taken for TLS", head)
	}
	for k := wire.APIKey(0); k.Known(); k++ {
		body := wire.NewRequest(k)
		frame := (&wire.Request{Header: wire.RequestHeader{APIKey: k, RequestID: 1}, Body: body}).AppendTo(nil)
		if looksLikeTLS(frame) {
			t.Fatalf("a %v request taken for TLS: % x", k, frame[:tlsHeadLen])
		}
	}
}

// TestPrefixed: the bytes read to tell TLS from plaintext are read again first.
func TestPrefixed(t *testing.T) {
	a, b := net.Pipe()
	go func() { a.Write([]byte("rest")); a.Close() }()
	p := &prefixed{Conn: b, head: []byte("head-")}
	got, err := io.ReadAll(p)
	if err != nil || string(got) != "head-rest" {
		t.Fatalf("read %q, %v", got, err)
	}
}
