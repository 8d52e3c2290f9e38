package test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sluice/internal/testbroker"
	"sluice/wire"
)

// The tests of the broker's memory budgets (netio's package comment): each runs a real
// broker process, attacks it as a hostile or broken client would, and checks from /proc
// and /metrics that what the broker holds stays under its budget, that a well-behaved
// client is served meanwhile, and that closing the attackers gives the memory back.

// pollFor polls cond every 20 ms until it holds, failing the test after a minute.
func pollFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after a minute waiting for %s", what)
		}
	}
}

// rssWatch samples a broker's RSS growth over a baseline and keeps the peak.
type rssWatch struct {
	t      *testing.T
	pid    int
	before int64
	peak   int64
}

func watchRSS(t *testing.T, b *testbroker.Broker) *rssWatch {
	return &rssWatch{t: t, pid: b.Pid(), before: rss(t, b.Pid())}
}

// growth samples the RSS growth now and returns it.
func (w *rssWatch) growth() int64 {
	g := rss(w.t, w.pid) - w.before
	w.peak = max(w.peak, g)
	return g
}

// atMost fails the test when the growth now is above limit.
func (w *rssWatch) atMost(limit int64, what string) {
	w.t.Helper()
	if g := w.growth(); g > limit {
		w.t.Fatalf("%s: broker RSS grew by %d MiB, limit %d MiB", what, g>>20, limit>>20)
	}
}

// goodClient produces and fetches on a partition of its own in a loop, on one
// connection, and counts the round trips that succeeded; any failure fails the test. It
// sends the same idempotent 64 KiB batch each time (acknowledged, never appended again,
// so that it does not grow the broker's memory) and fetches it back.
type goodClient struct {
	rounds atomic.Int64
	stop   chan struct{}
	done   chan error
}

func startGoodClient(t *testing.T, addr, topic string) *goodClient {
	t.Helper()
	w := dial(t, addr)
	createTopic(t, w, topic, 1)
	g := &goodClient{stop: make(chan struct{}), done: make(chan error, 1)}
	payload := records(7, 0, string(make([]byte, 1000)), 63)
	go func() {
		for {
			select {
			case <-g.stop:
				g.done <- nil
				return
			default:
			}
			if err := goodRound(w, topic, payload); err != nil {
				g.done <- err
				return
			}
			g.rounds.Add(1)
		}
	}()
	t.Cleanup(func() { close(g.stop); <-g.done })
	return g
}

// goodRound produces the batch (offset 0) and fetches it back.
func goodRound(w *wireConn, topic string, payload []byte) error {
	for _, req := range []wire.Body{
		&wire.ProduceRequest{Topic: []byte(topic), Version: 1, ProducerID: 7, Batches: payload},
		&wire.FetchRequest{Topic: []byte(topic), Offset: 0, MaxBytes: 1 << 20},
	} {
		id := w.send(req)
		frame, err := w.readFrame()
		if err != nil {
			return fmt.Errorf("well-behaved client: %v: %w", req.Key(), err)
		}
		var resp wire.Response
		if _, err := resp.Decode(frame, wire.DefaultMaxFrame); err != nil || resp.Header.RequestID != id {
			return fmt.Errorf("well-behaved client: answer to %d of %v: %v", resp.Header.RequestID, req.Key(), err)
		}
		if resp.Header.Code != wire.CodeNone {
			return fmt.Errorf("well-behaved client: %v answered %v %s", req.Key(), resp.Header.Code, resp.Text)
		}
		switch body := resp.Body.(type) {
		case *wire.ProduceResponse:
			if body.BaseOffset != 0 {
				return fmt.Errorf("well-behaved client: its batch was appended at %d", body.BaseOffset)
			}
		case *wire.FetchResponse:
			if !bytes.Equal(body.Records, payload[:len(body.Records)]) || len(body.Records) != len(payload) {
				return fmt.Errorf("well-behaved client: fetched %d bytes, not its batch", len(body.Records))
			}
		}
	}
	return nil
}

// served waits until the well-behaved client completes three more round trips.
func (g *goodClient) served(t *testing.T, when string) {
	t.Helper()
	start := g.rounds.Load()
	pollFor(t, "the well-behaved client to be served "+when, func() bool {
		select {
		case err := <-g.done:
			t.Fatal(err)
		default:
		}
		return g.rounds.Load() >= start+3
	})
}

// produceRetrying sends a produce request until it is accepted, waiting as the broker
// says when it answers busy (the partition is full of data not yet durable).
func produceRetrying(t *testing.T, w *wireConn, req *wire.ProduceRequest) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		resp := w.call(req)
		if resp.Header.Code != wire.CodeBusy || time.Now().After(deadline) {
			mustOK(t, resp)
			return
		}
		time.Sleep(time.Duration(resp.Body.(*wire.ProduceResponse).RetryAfterMs) * time.Millisecond)
	}
}

// requestHeader appends the header of a request frame announcing size bytes in all.
func requestHeader(dst []byte, size int, api wire.APIKey, id uint32) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(size-4))
	dst = binary.LittleEndian.AppendUint16(dst, uint16(api))
	dst = binary.LittleEndian.AppendUint16(dst, 0)
	return binary.LittleEndian.AppendUint32(dst, id)
}

// stream writes chunk to c over and over until limit bytes are written or a write fails,
// and returns what was written and the error.
func stream(c net.Conn, chunk []byte, limit int) (int, error) {
	c.SetWriteDeadline(time.Now().Add(2 * time.Minute))
	n := 0
	for n < limit {
		k, err := c.Write(chunk[:min(len(chunk), limit-n)])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// readAnswer reads one response frame from c, or returns the read error.
func readAnswer(c net.Conn) (*wire.Response, error) {
	c.SetReadDeadline(time.Now().Add(time.Minute))
	var lenBuf [4]byte
	if _, err := io.ReadFull(c, lenBuf[:]); err != nil {
		return nil, err
	}
	frame := make([]byte, 4+binary.LittleEndian.Uint32(lenBuf[:]))
	copy(frame, lenBuf[:])
	if _, err := io.ReadFull(c, frame[4:]); err != nil {
		return nil, err
	}
	var resp wire.Response
	if _, err := resp.Decode(frame, wire.DefaultMaxFrame); err != nil {
		return nil, err
	}
	return &resp, nil
}

// TestStalledLargeFrames: eight clients each send all but the last byte of a 60 MiB
// frame and stall. The broker holds at most its inbound budget (256 MiB; large frames
// may use half of it, so two are admitted and six refused from their header with busy),
// serves a well-behaved client throughout, and gives the memory back once they close.
// Before the budget each held its frame in a 128 MiB gnet buffer: +844 MiB, kept after
// they closed.
func TestStalledLargeFrames(t *testing.T) {
	const budget, frameSize, n = 256 << 20, 60 << 20, 8
	b := testbroker.Start(t, t.TempDir(), "-metrics", "127.0.0.1:0",
		"-net.max_inbound_total", "256MiB", "-net.frame_timeout", "10m")
	good := startGoodClient(t, b.Addr, "good")
	good.served(t, "before the attack")
	watch := watchRSS(t, b)

	writeErrs := make([]error, n)        // by the writers
	answers := make([]*wire.Response, n) // by the readers
	conns := make([]net.Conn, n)
	var writers, readers sync.WaitGroup
	chunk := requestHeader(make([]byte, 0, 1<<20), frameSize, wire.APIProduce, 0)
	chunk = chunk[:cap(chunk)]
	for i := range n {
		c, err := net.Dial("tcp", b.Addr)
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
		t.Cleanup(func() { c.Close() })
		first := append([]byte(nil), chunk...)
		binary.LittleEndian.PutUint32(first[8:], uint32(i+1)) // request id
		writers.Add(1)
		readers.Add(1)
		go func() {
			defer writers.Done()
			_, err := stream(c, first, len(first))
			if err == nil {
				_, err = stream(c, chunk[wire.RequestHeaderSize:], frameSize-1-len(first))
			}
			writeErrs[i] = err
		}()
		go func() { // a refused client gets its answer, then the connection closes
			defer readers.Done()
			answers[i], _ = readAnswer(c)
		}()
	}
	writers.Wait()
	admitted := 0
	for _, err := range writeErrs {
		if err == nil {
			admitted++
		}
	}
	// The peak: the broker has read everything the admitted clients sent.
	pollFor(t, "the admitted frames to be buffered", func() bool {
		watch.atMost(budget+64<<20, "while frames were arriving")
		return scrape(t, b.MetricsAddr, `sluice_net_inbound_bytes{kind="buffered"}`) >= float64(admitted*(frameSize-1))
	})
	good.served(t, "while the broker holds the stalled frames")
	watch.atMost(budget+64<<20, "with the stalled frames held")
	held := scrape(t, b.MetricsAddr, `sluice_net_inbound_bytes{kind="buffered"}`)
	refused := scrape(t, b.MetricsAddr, `sluice_net_refused_connections_total{reason="budget"}`)
	t.Logf("%d of %d stalled 60 MiB frames admitted, %.0f refused; broker holds %.0f MiB, RSS +%d MiB (peak +%d MiB)",
		admitted, n, refused, held/(1<<20), watch.growth()>>20, watch.peak>>20)
	if admitted == 0 || admitted == n || held > budget || int(refused) != n-admitted {
		t.Fatalf("admitted %d, refused %.0f, held %.0f bytes: want some admitted, the rest refused, at most %d held",
			admitted, refused, held, budget)
	}
	for _, c := range conns {
		c.Close()
	}
	readers.Wait()
	busy := 0
	for _, a := range answers {
		if a != nil && a.Header.Code == wire.CodeBusy && a.Header.RequestID != 0 {
			busy++
		}
	}
	if busy == 0 {
		t.Fatal("no refused client got a busy answer before its connection closed")
	}
	// Closing gives the memory back: nothing is kept in a pool that only grows.
	pollFor(t, "the memory to be given back after the stalled clients closed", func() bool {
		return watch.growth() < 48<<20 && scrape(t, b.MetricsAddr, `sluice_net_inbound_bytes{kind="buffered"}`) == 0
	})
	t.Logf("after they closed: RSS +%d MiB, idle inbound buffers %.0f KiB", watch.growth()>>20,
		scrape(t, b.MetricsAddr, `sluice_net_inbound_bytes{kind="idle"}`)/(1<<10))
	good.served(t, "after the stalled clients closed")
}

// TestBoundedWhileNotTakingRequests: a connection that cannot take requests (64 in
// flight, or answers it never reads) still has every byte it sends checked and charged:
// a junk stream is refused from its first frame header, and a stream of well-formed
// requests is refused at the connection's cap. Before, gnet buffered it all without any
// check once 64 requests were in flight (+3.5 GiB against a 130 MiB cap).
func TestBoundedWhileNotTakingRequests(t *testing.T) {
	const budget, limit = 256 << 20, 1 << 30 // what the attacker tries to send
	b := testbroker.Start(t, t.TempDir(), "-metrics", "127.0.0.1:0", "-net.max_inbound_total", "256MiB")
	good := startGoodClient(t, b.Addr, "good")
	w := dial(t, b.Addr)
	createTopic(t, w, "lp", 1)
	createTopic(t, w, "data", 1)
	var req []byte
	for len(req) < 1<<20 {
		req = append(req, records(0, -1, string(make([]byte, 1000)), 63)...)
	}
	for range 64 {
		produceRetrying(t, w, &wire.ProduceRequest{Topic: []byte("data"), Version: 1, Batches: req})
	}
	attack := func(t *testing.T, setup func(*wireConn), chunk []byte) {
		watch := watchRSS(t, b)
		a := dial(t, b.Addr)
		setup(a)
		var written int
		var err error
		done := make(chan struct{})
		go func() { written, err = stream(a.conn, chunk, limit); close(done) }()
		pollFor(t, "the broker to refuse the stream", func() bool {
			watch.atMost(budget+64<<20, "while the stream arrived")
			select {
			case <-done:
				return true
			default:
				return false
			}
		})
		if err == nil {
			t.Fatalf("the broker read all of a %d MiB stream from a connection that takes no requests", limit>>20)
		}
		good.served(t, "after the stream")
		t.Logf("stream refused after %d MiB written (%v); broker RSS peak +%d MiB", written>>20, err, watch.peak>>20)
	}

	t.Run("parked fetches then junk", func(t *testing.T) {
		errs := scrape(t, b.MetricsAddr, "sluice_protocol_errors_total")
		junk := make([]byte, 1<<20)
		for i := range junk {
			junk[i] = 'Z'
		}
		attack(t, func(a *wireConn) {
			for range 64 {
				a.send(&wire.FetchRequest{Topic: []byte("lp"), Offset: 0, MaxBytes: 1 << 20, MaxWaitMs: 60000})
			}
		}, junk)
		if got := scrape(t, b.MetricsAddr, "sluice_protocol_errors_total"); got != errs+1 {
			t.Fatalf("protocol errors went from %.0f to %.0f, want one more (the junk's frame header)", errs, got)
		}
	})
	t.Run("unread answers then requests", func(t *testing.T) {
		refused := scrape(t, b.MetricsAddr, `sluice_net_refused_connections_total{reason="connection"}`) +
			scrape(t, b.MetricsAddr, `sluice_net_refused_connections_total{reason="budget"}`)
		produce := wire.Request{Header: wire.RequestHeader{APIKey: wire.APIProduce, RequestID: 1000},
			Body: &wire.ProduceRequest{Topic: []byte("data"), Version: 1, Batches: req}}
		attack(t, func(a *wireConn) {
			for i := range 64 { // 256 MiB of answers it never reads
				a.send(&wire.FetchRequest{Topic: []byte("data"), Offset: int64(i * 16 * 63), MaxBytes: 4 << 20})
			}
		}, produce.AppendTo(nil))
		if got := scrape(t, b.MetricsAddr, `sluice_net_refused_connections_total{reason="connection"}`) +
			scrape(t, b.MetricsAddr, `sluice_net_refused_connections_total{reason="budget"}`); got != refused+1 {
			t.Fatalf("refused connections went from %.0f to %.0f, want one more", refused, got)
		}
	})
}

// TestHalfSentFrameTimesOut: a connection that sends part of a frame and stops is
// answered with timeout and closed after net.frame_timeout; an idle connection without a
// partial frame is left alone.
func TestHalfSentFrameTimesOut(t *testing.T) {
	b := testbroker.Start(t, t.TempDir(), "-metrics", "127.0.0.1:0", "-net.frame_timeout", "300ms")
	idle := dial(t, b.Addr)
	half, err := net.Dial("tcp", b.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer half.Close()
	if _, err := half.Write(requestHeader(nil, 1000, wire.APIFetch, 7)); err != nil {
		t.Fatal(err)
	}
	resp, err := readAnswer(half)
	if err != nil {
		t.Fatalf("no answer to a half-sent frame: %v", err)
	}
	if resp.Header.Code != wire.CodeTimeout || resp.Header.RequestID != 7 {
		t.Fatalf("answer %v to request %d, want timeout to 7", resp.Header.Code, resp.Header.RequestID)
	}
	if _, err := readAnswer(half); !errors.Is(err, io.EOF) {
		t.Fatalf("connection not closed after the timeout answer: %v", err)
	}
	if got := scrape(t, b.MetricsAddr, "sluice_net_frames_timed_out_total"); got != 1 {
		t.Fatalf("frames timed out: %.0f, want 1", got)
	}
	// The idle connection waited as long and is still served.
	mustOK(t, idle.call(&wire.MetadataRequest{}))
}

// TestNeverReadingConsumers: forty consumers fetch memory-resident data and never read
// the answers. What their answers hold (arena chunks the partition has let go of but a
// queued answer still references) stays under the outbound budget, so the broker's RSS
// grows little while a producer keeps the partition's memory cycling, and a normal
// consumer is served. Before the budget the same clients held 120 MiB of chunks.
func TestNeverReadingConsumers(t *testing.T) {
	const budget = 32 << 20
	b := testbroker.Start(t, t.TempDir(), "-metrics", "127.0.0.1:0", "-arena.partition_max", "128MiB",
		"-net.max_outbound_total", "32MiB")
	w := dial(t, b.Addr)
	createTopic(t, w, "m", 1)
	var req []byte
	for len(req) < 1<<20 {
		req = append(req, records(0, -1, string(make([]byte, 1000)), 63)...)
	}
	const perMiB = 16 * 63 // records in one request
	produce := func(mib int) {
		for range mib {
			produceRetrying(t, w, &wire.ProduceRequest{Topic: []byte("m"), Version: 1, Batches: req})
		}
	}
	produce(200) // the partition keeps the last 128 MiB in memory
	watch := watchRSS(t, b)
	next := int64(200 * perMiB)
	lo := next - 120*perMiB
	for i := range 40 {
		c := dial(t, b.Addr)
		for j := range 64 {
			c.send(&wire.FetchRequest{Topic: []byte("m"), Offset: lo + int64(i*64+j)*(next-lo)/2560, MaxBytes: 4 << 20})
		}
	}
	held := func() float64 {
		return scrape(t, b.MetricsAddr, `sluice_net_outbound_bytes{kind="queued"}`) +
			scrape(t, b.MetricsAddr, `sluice_net_outbound_bytes{kind="reserved"}`)
	}
	pollFor(t, "the consumers' answers to be queued", func() bool { return held() >= budget })
	produce(256) // the partition's memory turns over twice: what answers hold cannot be reused
	watch.atMost(budget+48<<20, "with 40 consumers that never read")
	// The outbound budget is exceeded by at most one batch per connection.
	if h, other := held(), scrape(t, b.MetricsAddr, `sluice_arena_bytes{kind="other"}`); h > budget+41*(64<<10) || other > budget+12<<20 {
		t.Fatalf("answers hold %.0f MiB, arena chunks held only by readers %.0f MiB: budget %d MiB", h/(1<<20), other/(1<<20), budget>>20)
	}
	// A normal consumer is served from memory.
	c := dial(t, b.Addr)
	resp := c.call(&wire.FetchRequest{Topic: []byte("m"), Offset: next + 200*perMiB, MaxBytes: 1 << 20})
	mustOK(t, resp)
	if len(resp.Body.(*wire.FetchResponse).Records) == 0 {
		t.Fatal("a normal consumer got no records")
	}
	t.Logf("40 never-reading consumers: answers hold %.1f MiB, arena chunks held by readers %.1f MiB, RSS +%d MiB; %.0f fetches clamped",
		held()/(1<<20), scrape(t, b.MetricsAddr, `sluice_arena_bytes{kind="other"}`)/(1<<20), watch.growth()>>20,
		scrape(t, b.MetricsAddr, "sluice_net_fetches_clamped_total"))
}
