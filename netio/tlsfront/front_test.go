package tlsfront

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
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

// flakyListener fails its first Accepts, then closes: a fake, because a real listener
// cannot be made to return EMFILE on demand.
type flakyListener struct {
	net.Listener
	fails int
	calls int
}

func (l *flakyListener) Accept() (net.Conn, error) {
	l.calls++
	if l.calls <= l.fails {
		return nil, errors.New("accept: too many open files")
	}
	return nil, net.ErrClosed
}

// TestAcceptErrorsDoNotStopTheFront: accept errors other than a closed listener (out of
// file descriptors) are waited out, not the end of the front's accepting.
func TestAcceptErrorsDoNotStopTheFront(t *testing.T) {
	l := &flakyListener{fails: 3}
	f := &Front{ln: l, conns: map[net.Conn]struct{}{}, cfg: Config{Logger: slog.New(slog.DiscardHandler)}}
	f.wg.Add(1)
	f.accept()
	if l.calls != 4 {
		t.Fatalf("accept called %d times, want 3 failures then the close", l.calls)
	}
}
