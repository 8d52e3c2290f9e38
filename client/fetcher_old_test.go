package client

import (
	"errors"
	"io"
	"net"
	"testing"

	"sluice/wire"
)

// TestFetcherOldBroker: a broker that predates a fetch_multi version answers it with
// unsupported_version (and closes the connection); the fetcher reports oldBrokerError,
// and the consumer's next fetcher for that broker asks for the version below, down to
// the one it knows. The far end of a net.Pipe plays the old broker: a fake, because no
// real broker of this tree refuses the newest version (fault injection the real part
// cannot do).
func TestFetcherOldBroker(t *testing.T) {
	for _, known := range []uint16{0, 1} {
		testOldBroker(t, known)
	}
}

func testOldBroker(t *testing.T, known uint16) {
	c := &Consumer{cfg: defaultCfg(), topic: "t", topicB: []byte("t")}
	p := &cpart{id: 0, addr: "old:1"}
	newFetcher := func(version uint16) (*fetcher, net.Conn) {
		near, far := net.Pipe()
		t.Cleanup(func() { near.Close(); far.Close() })
		return &fetcher{c: c, addr: p.addr, parts: []*cpart{p}, pos: []int64{7}, nc: near, version: version}, far
	}
	// oldBroker reads one request and answers it as a broker knowing versions up to known.
	oldBroker := func(far net.Conn, done chan<- error) {
		var hdr [wire.RequestHeaderSize]byte
		if _, err := io.ReadFull(far, hdr[:]); err != nil {
			done <- err
			return
		}
		size, h, err := wire.PeekFrame(hdr[:], wire.DefaultMaxFrame)
		if err == nil || h.APIVersion <= known { // this tree's PeekFrame knows up to 2
			rest := make([]byte, size-wire.RequestHeaderSize)
			if _, err := io.ReadFull(far, rest); err != nil {
				done <- err
				return
			}
		}
		var out []byte
		if h.APIVersion > known {
			out = wire.AppendErrorResponse(nil, h, wire.NewError(wire.CodeUnsupportedVersion, ""))
		} else {
			part := wire.FetchPart{Partition: 0, HighWatermark: 7, Checkpoint: -1}
			if h.APIVersion >= 1 {
				part.NextOffset = 7
			}
			resp := wire.Response{Header: wire.ResponseHeader{RequestID: h.RequestID, APIKey: wire.APIFetchMulti},
				Body: &wire.FetchMultiResponse{Parts: []wire.FetchPart{part}, Version: h.APIVersion}}
			out = resp.AppendTo(nil)
		}
		_, err = far.Write(out)
		done <- err
		io.Copy(io.Discard, far) // a request sent early: the pipe takes it, nothing answers
	}

	done := make(chan error, 1)
	for v := uint16(newestFetchVersion); v > known; v-- {
		if got := c.fetchVersion("old:1"); got != v {
			t.Fatalf("broker of version %d: version %d asked, want %d", known, got, v)
		}
		f, far := newFetcher(v)
		go oldBroker(far, done)
		err := f.fetch(&answer{f: f})
		var ob *oldBrokerError
		if !errors.As(err, &ob) || ob.addr != "old:1" || !retriable(err) {
			t.Fatalf("version %d against a broker of version %d: %v, want a retriable oldBrokerError", v, known, err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		c.noteOldBroker(err)
	}
	if c.fetchVersion("old:1") != known || c.fetchVersion("new:1") != newestFetchVersion {
		t.Fatalf("after the refusals: version %d for the old broker, %d for another", c.fetchVersion("old:1"), c.fetchVersion("new:1"))
	}

	f, far := newFetcher(c.fetchVersion("old:1"))
	go oldBroker(far, done)
	a := &answer{f: f}
	if err := f.fetch(a); err != nil {
		t.Fatalf("version %d: %v", known, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if f.early != (known == 1) || f.pos[0] != 7 || len(a.parts) != 0 {
		t.Fatalf("version %d: early %v, position %d, %d parts", known, f.early, f.pos[0], len(a.parts))
	}
}
