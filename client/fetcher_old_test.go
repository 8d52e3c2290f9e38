package client

import (
	"errors"
	"io"
	"net"
	"testing"

	"sluice/wire"
)

// TestFetcherOldBroker: a broker that predates fetch_multi version 1 answers it with
// unsupported_version (and closes the connection); the fetcher reports oldBrokerError,
// and a fetcher of version 0 reads that broker. The far end of a net.Pipe plays the old
// broker: a fake, because no real broker of this tree refuses version 1 (fault
// injection the real part cannot do).
func TestFetcherOldBroker(t *testing.T) {
	c := &Consumer{cfg: defaultCfg(), topic: "t", topicB: []byte("t")}
	p := &cpart{id: 0, addr: "old:1"}
	newFetcher := func(version uint16) (*fetcher, net.Conn) {
		near, far := net.Pipe()
		t.Cleanup(func() { near.Close(); far.Close() })
		return &fetcher{c: c, addr: p.addr, parts: []*cpart{p}, pos: []int64{7}, nc: near, version: version}, far
	}
	// oldBroker reads one request and answers it as a broker knowing only version 0.
	oldBroker := func(far net.Conn, done chan<- error) {
		var hdr [wire.RequestHeaderSize]byte
		if _, err := io.ReadFull(far, hdr[:]); err != nil {
			done <- err
			return
		}
		size, h, err := wire.PeekFrame(hdr[:], wire.DefaultMaxFrame)
		if err == nil || h.APIVersion == 0 { // version 0 is known: PeekFrame accepts it
			rest := make([]byte, size-wire.RequestHeaderSize)
			if _, err := io.ReadFull(far, rest); err != nil {
				done <- err
				return
			}
		}
		var out []byte
		if h.APIVersion > 0 {
			out = wire.AppendErrorResponse(nil, h, wire.NewError(wire.CodeUnsupportedVersion, ""))
		} else {
			resp := wire.Response{Header: wire.ResponseHeader{RequestID: h.RequestID, APIKey: wire.APIFetchMulti},
				Body: &wire.FetchMultiResponse{Parts: []wire.FetchPart{{Partition: 0, HighWatermark: 7, Checkpoint: -1}}}}
			out = resp.AppendTo(nil)
		}
		_, err = far.Write(out)
		done <- err
	}

	f, far := newFetcher(1)
	done := make(chan error, 1)
	go oldBroker(far, done)
	err := f.fetch(&answer{f: f})
	var ob *oldBrokerError
	if !errors.As(err, &ob) || ob.addr != "old:1" || !retriable(err) {
		t.Fatalf("version 1 against an old broker: %v, want a retriable oldBrokerError", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c.fetchVersion("old:1") != 1 {
		t.Fatal("version 0 asked before the broker refused 1")
	}
	c.noteOldBroker(err)
	if c.fetchVersion("old:1") != 0 || c.fetchVersion("new:1") != 1 {
		t.Fatalf("after the refusal: version %d for the old broker, %d for another", c.fetchVersion("old:1"), c.fetchVersion("new:1"))
	}

	f, far = newFetcher(c.fetchVersion("old:1"))
	go oldBroker(far, done)
	a := &answer{f: f}
	if err := f.fetch(a); err != nil {
		t.Fatalf("version 0: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if f.early || f.pos[0] != 7 || len(a.parts) != 0 {
		t.Fatalf("version 0: early %v, position %d, %d parts", f.early, f.pos[0], len(a.parts))
	}
}
