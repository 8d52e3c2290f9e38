package client_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"sluice/client"
	"sluice/wire"
)

// TestAnswerOfAnotherKey: a broker that answers a metadata request with a success of
// another API (the request's id, a produce's key and body) gets a clear error from the
// client (a connection failure: it drops the connection and retries), never a panic. The body is decoded by the key
// the answer names, so an answer matched by id alone handed the metadata call a body of
// the wrong type. A real broker cannot be made to answer so: this fake is the one
// used here.
func TestAnswerOfAnotherKey(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); answerWithProduceKey(c) }()
		}
	}()
	// A backoff longer than the call's context: the error reports the first answer's.
	a, err := client.NewAdmin(client.Brokers(ln.Addr().String()), client.RetryBackoff(time.Minute, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = a.Metadata(ctx)
	if err == nil || !strings.Contains(err.Error(), "cannot match answer") {
		t.Fatalf("metadata from a broker answering with another key: %v", err)
	}
}

// answerWithProduceKey answers every request on c with a successful produce answer that
// carries the request's id, until c closes.
func answerWithProduceKey(c net.Conn) {
	defer c.Close()
	for {
		frame, err := readFrame(c) // consumer_refresh_test.go
		if err != nil {
			return
		}
		_, hdr, err := wire.PeekFrame(frame, wire.DefaultMaxFrame)
		if err != nil {
			return
		}
		out := wire.AppendResponseHeader(nil, wire.ResponseHeader{RequestID: hdr.RequestID, APIKey: wire.APIProduce}, "")
		out = (&wire.ProduceResponse{BaseOffset: 0, LastOffset: 0}).AppendTo(out)
		wire.FinishFrame(out, 0)
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}
