package test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"sluice/client"
	"sluice/internal/testbroker"
	"sluice/wire"
)

// Real TLS handshakes against a broker process, with certificates made here.

// pki is a test CA and the files of the certificates it issued.
type pki struct {
	t    testing.TB
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
	file string // the CA certificate, PEM
}

func newPKI(t testing.TB, name string) *pki {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	p := &pki{t: t, dir: t.TempDir(), cert: cert, key: key, pool: x509.NewCertPool()}
	p.pool.AddCert(cert)
	p.file = p.write(name+"-ca.pem", "CERTIFICATE", der)
	return p
}

func (p *pki) write(name, kind string, der []byte) string {
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		p.t.Fatal(err)
	}
	return path
}

// issue makes a certificate for 127.0.0.1 (a server) or a client, valid from nb to na;
// it returns the certificate and key files.
func (p *pki) issue(name string, serial int64, client bool, nb, na time.Time) (certFile, keyFile string) {
	return p.sign(name, serial, client, nb, na, false)
}

// selfSignedServer makes a server certificate for 127.0.0.1 signed by its own key, not
// the CA's; it returns the certificate and key files.
func (p *pki) selfSignedServer(name string, serial int64) (certFile, keyFile string) {
	return p.sign(name, serial, false, time.Now().Add(-time.Minute), time.Now().Add(time.Hour), true)
}

func (p *pki) sign(name string, serial int64, client bool, nb, na time.Time, self bool) (certFile, keyFile string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: nb, NotAfter: na, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	if client {
		tmpl.ExtKeyUsage, tmpl.IPAddresses = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil
	}
	parent, parentKey := p.cert, p.key
	if self {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		p.t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return p.write(name+".pem", "CERTIFICATE", der), p.write(name+"-key.pem", "EC PRIVATE KEY", kder)
}

func (p *pki) valid(name string, serial int64, client bool) (string, string) {
	return p.issue(name, serial, client, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
}

// selfSigned returns a certificate signed by its own key (a CA of nobody's trust) as a
// client certificate.
func selfSigned(t testing.TB, name string) tls.Certificate {
	p := newPKI(t, name)
	return tls.Certificate{Certificate: [][]byte{p.cert.Raw}, PrivateKey: p.key, Leaf: p.cert}
}

// forceCert is a client configuration trusting roots that sends cert whatever CAs the
// server asks for.
func forceCert(roots *x509.CertPool, cert tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: roots, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &cert, nil
	}}
}

// tlsCall makes one metadata call over TLS with conf and returns the server's
// certificate serial, or the error.
func tlsCall(addr string, conf *tls.Config) (int64, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, conf)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if _, err := c.Write(metadataFrame(7)); err != nil {
		return 0, err
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	head := make([]byte, wire.ResponseHeaderSize)
	if _, err := c.Read(head); err != nil {
		return 0, err
	}
	if _, hdr, _ := wire.PeekResponse(head, 1<<20); hdr.RequestID != 7 || hdr.Code != wire.CodeNone {
		return 0, &net.AddrError{Err: "bad answer " + hdr.Code.String(), Addr: addr}
	}
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
}

// metadataFrame is a metadata request frame with request id id.
func metadataFrame(id uint32) []byte {
	req := wire.Request{Header: wire.RequestHeader{APIKey: wire.APIMetadata, RequestID: id}, Body: &wire.MetadataRequest{}}
	return req.AppendTo(nil)
}

// TestTLSListener: a broker serving TLS takes clients that trust its CA (produce and
// consume through the Go client); refuses a plaintext client with tls_required; fails
// the handshakes of clients that trust another CA (logged at warning level); reloads its
// certificate on SIGHUP without dropping the connections already open, and shows its
// expiry in sluice_tls_certificate_expiry_seconds; refuses, loudly, a reload of a
// certificate expired or not valid yet, and keeps serving the one it has.
func TestTLSListener(t *testing.T) {
	ca := newPKI(t, "sluice-test")
	cert, key := ca.valid("broker", 10, false)
	b := testbroker.Start(t, t.TempDir(), "-metrics", "127.0.0.1:0", "-tls.cert", cert, "-tls.key", key)
	good := &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12}

	// The Go client over TLS: create, produce, consume.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := client.NewAdmin(client.Brokers(b.Addr), client.TLS(good))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.CreateTopic(ctx, "s", 2, wire.TopicOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := client.NewProducer(ctx, "s", client.Brokers(b.Addr), client.TLS(good))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := p.Produce(ctx, &client.Record{Key: []byte{byte(i)}, Value: []byte("secret")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := client.NewConsumer(ctx, "s", client.Brokers(b.Addr), client.TLS(good), client.Start(client.Oldest()))
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for read < 100 {
		if err := c.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		for c.Next() {
			read++
		}
	}
	c.Close()

	// Plaintext on the TLS port: one clear answer, then the connection closes.
	w := dial(t, b.Addr)
	if r := w.call(&wire.MetadataRequest{}); r.Header.Code != wire.CodeTLSRequired || !strings.Contains(r.Text, "TLS") {
		t.Fatalf("plaintext on the TLS port: %v %q", r.Header.Code, r.Text)
	}

	// A client trusting another CA (the broker's certificate is as good as self-signed
	// to it) fails its handshake.
	other := newPKI(t, "other")
	if _, err := tlsCall(b.Addr, &tls.Config{RootCAs: other.pool}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a client trusting another CA: %v", err)
	}

	// TLS 1.1 and older are refused (TLS 1.2 is the oldest the broker speaks).
	if _, err := tlsCall(b.Addr, &tls.Config{RootCAs: ca.pool, MaxVersion: tls.VersionTLS11}); err == nil ||
		!strings.Contains(err.Error(), "version") {
		t.Fatalf("a TLS 1.1 client: %v", err)
	}
	if _, err := tlsCall(b.Addr, &tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12}); err != nil {
		t.Fatalf("a TLS 1.2 client: %v", err)
	}

	// SIGHUP with a new certificate: new connections get it, an open one goes on.
	open, err := tls.Dial("tcp", b.Addr, good)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	newCert, newKey := ca.valid("broker2", 11, false)
	os.Rename(newCert, cert)
	os.Rename(newKey, key)
	syscall.Kill(b.Pid(), syscall.SIGHUP)
	waitFor(t, "the new certificate after SIGHUP", func() bool {
		serial, err := tlsCall(b.Addr, good)
		return err == nil && serial == 11
	})
	if _, err := open.Write(metadataFrame(1)); err != nil {
		t.Fatalf("a connection open across the reload: %v", err)
	}
	open.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := open.Read(make([]byte, wire.ResponseHeaderSize)); err != nil {
		t.Fatalf("a connection open across the reload got no answer: %v", err)
	}

	expiry := float64(certNotAfter(t, cert).Unix())
	if got := scrape(t, b.MetricsAddr, "sluice_tls_certificate_expiry_seconds"); got != expiry {
		t.Fatalf("sluice_tls_certificate_expiry_seconds %v, want the new certificate's %v", got, expiry)
	}

	// An expired certificate, and one not valid yet, reloaded: each reload is refused,
	// loudly, and the serving certificate stays (before, the expired one was taken and
	// every handshake failed).
	for i, valid := range [][2]time.Time{{time.Now().Add(-2 * time.Hour), time.Now().Add(-time.Hour)},
		{time.Now().Add(time.Hour), time.Now().Add(2 * time.Hour)}} {
		badCert, badKey := ca.issue("bad", int64(12+i), false, valid[0], valid[1])
		os.Rename(badCert, cert)
		os.Rename(badKey, key)
		syscall.Kill(b.Pid(), syscall.SIGHUP)
		waitFor(t, "the refused reload", func() bool {
			return scrape(t, b.MetricsAddr, `sluice_tls_reloads_total{result="failed"}`) == float64(i+1)
		})
		if serial, err := tlsCall(b.Addr, good); err != nil || serial != 11 {
			t.Fatalf("after a refused reload: serial %d (%v), want the serving 11", serial, err)
		}
	}
	if got := scrape(t, b.MetricsAddr, "sluice_tls_certificate_expiry_seconds"); got != expiry {
		t.Fatalf("sluice_tls_certificate_expiry_seconds %v after refused reloads, want %v", got, expiry)
	}
	log := b.Log()
	for _, want := range []string{`level=ERROR msg="TLS reload refused: the serving certificate stays"`, "it expired at",
		"it is not valid before", `level=WARN msg="TLS handshake failed"`} {
		if !strings.Contains(log, want) {
			t.Fatalf("the log does not say %q:\n%s", want, log)
		}
	}
	if n := scrape(t, b.MetricsAddr, `sluice_tls_connections_total{result="plaintext"}`); n != 1 {
		t.Fatalf("plaintext connections counted %v, want 1", n)
	}
	if n := scrape(t, b.MetricsAddr, `sluice_tls_connections_total{result="failed"}`); n < 2 {
		t.Fatalf("failed handshakes counted %v, want at least 2", n)
	}
	if strings.Contains(log, "PRIVATE KEY") {
		t.Fatal("the broker logged key material")
	}
}

// certNotAfter returns when the certificate in file expires.
func certNotAfter(t *testing.T, file string) time.Time {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		t.Fatalf("no PEM block in %s", file)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.NotAfter
}

// TestTLSCertificateAtStart: a broker given a certificate that has expired, or is not
// valid yet, does not start (exit 1) and says which and when; every client would have
// refused it.
func TestTLSCertificateAtStart(t *testing.T) {
	ca := newPKI(t, "sluice-test")
	for i, c := range []struct {
		nb, na time.Time
		want   string
	}{
		{time.Now().Add(-2 * time.Hour), time.Now().Add(-time.Hour), "it expired at"},
		{time.Now().Add(time.Hour), time.Now().Add(2 * time.Hour), "it is not valid before"},
	} {
		cert, key := ca.issue(fmt.Sprintf("bad%d", i), int64(20+i), false, c.nb, c.na)
		code, _, errOut := testbroker.Run(t, "", "broker", "-data", t.TempDir(), "-listen", "127.0.0.1:0",
			"-tls.cert", cert, "-tls.key", key)
		if code != 1 || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, cert) {
			t.Fatalf("a start on a certificate (%s): exit %d\n%s", c.want, code, errOut)
		}
	}
}

// TestTLSClientCertificates: with tls.client_ca a client without a certificate, with
// one from another CA, with the CA's but expired, or with a self-signed one fails the
// handshake, and the Go client says which at once: ErrTLSMismatch, "the broker refused
// this client's TLS" and the broker's alert. One with a certificate from the CA is
// served. A broker serving a self-signed certificate is refused by a client trusting the
// CA ("its certificate was refused", unknown authority), served to one trusting that
// certificate itself. A TLS client on a plaintext port gets an error that says so.
func TestTLSClientCertificates(t *testing.T) {
	ca := newPKI(t, "sluice-test")
	cert, key := ca.valid("broker", 10, false)
	b := testbroker.Start(t, t.TempDir(), "-tls.cert", cert, "-tls.key", key, "-tls.client_ca", ca.file)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// refused calls addr with conf through the Go client and fails the test unless the
	// error is ErrTLSMismatch and says each of says, at once (no retries until ctx ends).
	refused := func(what, addr string, conf *tls.Config, says ...string) {
		t.Helper()
		a, err := client.NewAdmin(client.Brokers(addr), client.TLS(conf))
		if err != nil {
			t.Fatal(err)
		}
		_, err = a.Metadata(ctx)
		a.Close()
		if !errors.Is(err, client.ErrTLSMismatch) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: %v, want ErrTLSMismatch", what, err)
		}
		for _, s := range says {
			if !strings.Contains(err.Error(), s) {
				t.Fatalf("%s: %q does not say %q", what, err, s)
			}
		}
	}
	pair := func(certFile, keyFile string) []tls.Certificate {
		t.Helper()
		p, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{p}
	}
	const brokerRefused = "the broker refused this client's TLS"
	conf := &tls.Config{RootCAs: ca.pool}
	refused("a client without a certificate", b.Addr, conf, brokerRefused, "certificate required")
	other := newPKI(t, "other")
	// crypto/tls's client sends no certificate that none of the broker's CAs signed (it
	// matches them against the CA names the broker sends): the broker sees none. A
	// client that sends it anyway (forced here) has it refused by the broker's check.
	intruder := pair(other.valid("intruder", 2, true))
	refused("a client with another CA's certificate", b.Addr, &tls.Config{RootCAs: ca.pool, Certificates: intruder},
		brokerRefused, "certificate required")
	refused("a client sending another CA's certificate", b.Addr, forceCert(ca.pool, intruder[0]),
		brokerRefused, "unknown certificate authority")
	refused("a client with an expired certificate", b.Addr, &tls.Config{RootCAs: ca.pool,
		Certificates: pair(ca.issue("expired-app", 4, true, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)))},
		brokerRefused, "expired certificate")
	refused("a client sending a self-signed certificate", b.Addr, forceCert(ca.pool, selfSigned(t, "self")),
		brokerRefused, "unknown certificate authority")
	if _, err := tlsCall(b.Addr, &tls.Config{RootCAs: ca.pool, Certificates: pair(ca.valid("app", 3, true))}); err != nil {
		t.Fatalf("a client with the CA's certificate: %v", err)
	}
	refused("a client trusting another CA", b.Addr, &tls.Config{RootCAs: other.pool},
		"its certificate was refused", "certificate signed by unknown authority")

	// A broker with a self-signed certificate: refused by clients trusting the CA, served
	// to clients trusting the certificate itself.
	selfCert, selfKey := ca.selfSignedServer("self-broker", 30)
	self := testbroker.Start(t, t.TempDir(), "-tls.cert", selfCert, "-tls.key", selfKey)
	refused("a self-signed broker", self.Addr, conf, "its certificate was refused", "certificate signed by unknown authority")
	selfPool := x509.NewCertPool()
	selfPool.AddCert(pair(selfCert, selfKey)[0].Leaf)
	if serial, err := tlsCall(self.Addr, &tls.Config{RootCAs: selfPool}); err != nil || serial != 30 {
		t.Fatalf("a client trusting the self-signed certificate: serial %d, %v", serial, err)
	}

	plain := testbroker.Start(t, t.TempDir())
	refused("TLS to a plaintext port", plain.Addr, conf, "it answered in plaintext")
	a, err := client.NewAdmin(client.Brokers(b.Addr), client.DialTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Metadata(ctx); !client.IsCode(err, wire.CodeTLSRequired) || !strings.Contains(err.Error(), "this port speaks TLS") {
		t.Fatalf("plaintext to a TLS port: %v", err)
	}
}
