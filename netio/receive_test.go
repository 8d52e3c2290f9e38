package netio

import (
	"bufio"
	"hash/crc32"
	"net"
	"testing"
	"time"

	"sluice/wire"
)

// sendAll writes one produce frame per payload on a new connection, from another
// goroutine, checks that every answer comes back in order with its payload's CRC, and
// returns the server's counters once the connection is closed and settled.
func sendAll(t *testing.T, s *Server, payloads [][]byte) Stats {
	t.Helper()
	var stream []byte
	for i, p := range payloads {
		req := wire.Request{Header: wire.RequestHeader{APIKey: wire.APIProduce, RequestID: uint32(i)},
			Body: &wire.ProduceRequest{Topic: []byte("t"), Version: 1, Batches: p}}
		stream = req.AppendTo(stream)
	}
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	go c.Write(stream) // one write: the socket holds as much as it can take
	r := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(time.Minute))
	for i, p := range payloads {
		resp, err := readAnswer(r)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		body, _ := resp.Body.(*wire.ProduceResponse)
		if resp.Header.Code != wire.CodeNone || resp.Header.RequestID != uint32(i) || uint32(body.BaseOffset) != crc32.ChecksumIEEE(p) {
			t.Fatalf("answer %d: request %d, code %v %s", i, resp.Header.RequestID, resp.Header.Code, resp.Text)
		}
	}
	c.Close()
	st := settled(t, s)
	if st.InboundBuffered != 0 {
		t.Fatalf("%d bytes still charged to the inbound budget", st.InboundBuffered)
	}
	return st
}

// TestLargeFramesReadDirect: 1 MiB frames reach the inbuf by netio's own reads, straight
// from the socket: what passes through gnet's buffer (and is copied from there) is at most
// its small read per readable event, a sliver of each frame.
//
// The client pipelines all 32 MiB at once, far past MaxInflight; the connection's cap
// holds the whole pipeline, so that a loaded host whose handler falls behind the socket
// does not turn the test into one of the budget (busy is what the default cap answers,
// as it should: TestPausedConnectionRefusedRead and TestInboundBudgetPolicy cover that).
func TestLargeFramesReadDirect(t *testing.T) {
	s := startTestServer(t, Config{MaxFrame: 4 << 20, MaxInflight: 4, MaxInbound: 40 << 20, MaxInboundTotal: 128 << 20})
	var payloads [][]byte
	total := 0
	for i := range 32 {
		p := random[i%15<<20 : (i%15+1)<<20]
		payloads = append(payloads, p)
		total += len(p)
	}
	st := sendAll(t, s, payloads)
	t.Logf("copied from gnet: %d of %d bytes; read directly: %d", st.BytesHeld, total, st.BytesReceived)
	if st.BytesHeld > uint64(total/8) {
		t.Fatalf("%d of %d bytes were copied from gnet's buffer: the frames were not read directly", st.BytesHeld, total)
	}
	if st.BytesReceived < uint64(total-total/8) {
		t.Fatalf("netio read %d of %d bytes itself", st.BytesReceived, total)
	}
}

// TestPipelinedSmallFramesReadAhead: a burst of small frames sent at once is read ahead
// into the inbuf, beyond gnet's small read, and every one is answered in order.
func TestPipelinedSmallFramesReadAhead(t *testing.T) {
	s := startTestServer(t, Config{MaxInflight: 64})
	var payloads [][]byte
	for i := range 5000 {
		payloads = append(payloads, random[i*100:i*100+1+i%200])
	}
	st := sendAll(t, s, payloads)
	if st.BytesReceived == 0 {
		t.Fatal("netio read nothing ahead of gnet's reads")
	}
	if st.Requests != uint64(len(payloads)) {
		t.Fatalf("%d requests", st.Requests)
	}
}
