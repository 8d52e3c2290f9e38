package netio

import (
	"bufio"
	"context"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"sluice/wire"
)

// echoHandler answers each produce request, from another goroutine, with the CRC of its
// batches in BaseOffset; the copy it makes is all it keeps of the request.
type echoHandler struct{}

func (echoHandler) Serving(string) {}

func (echoHandler) Handle(c *Conn, sl Slot, req *wire.Request) {
	crc := crc32.ChecksumIEEE(req.Body.(*wire.ProduceRequest).Batches)
	hdr := wire.ResponseHeader{RequestID: req.Header.RequestID, APIKey: req.Header.APIKey}
	go func() {
		r := wire.Response{Header: hdr, Body: &wire.ProduceResponse{BaseOffset: int64(crc), LastOffset: int64(crc)}}
		c.Respond(sl, Response{Head: r.AppendTo(nil), File: -1})
	}()
}

func startTestServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	return startServer(t, cfg, echoHandler{})
}

// startServer starts a server of one event loop on a loopback port with handler h,
// stopped when the test ends.
func startServer(t *testing.T, cfg Config, h Handler) *Server {
	t.Helper()
	cfg.Listen, cfg.Loops = "127.0.0.1:0", 1
	s, err := Start(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Stop(ctx)
	})
	return s
}

// random is where the test frames take their payloads from.
var random = func() []byte {
	b := make([]byte, 16<<20)
	rng := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
	}
	return b
}()

// TestReadSplitFrames sends frames of random sizes (from a few bytes of payload to several
// gnet read buffers) cut at random points, on connections allowed few requests in flight,
// and checks that every request reaches the handler whole and in order, and that the
// budgets are back to nothing afterwards. It covers each path of the reader: frames handed
// over in place, partial frames completed across reads, large frames reserved whole,
// backlogs held while the connection takes no requests, and buffers grown by copying and
// by remapping. The client keeps at most 24 MiB unanswered: under the connection's cap.
func TestReadSplitFrames(t *testing.T) {
	for _, inflight := range []int{1, 4, 64} {
		// Small holdings up to 2 MiB; large ones share 32 MiB; a connection holds 32 MiB.
		s := startTestServer(t, Config{MaxFrame: 16 << 20, MaxInflight: inflight, MaxInboundTotal: 64 << 20})
		rng := rand.New(rand.NewPCG(uint64(inflight), 1))
		var stream []byte
		var ends []int // where each frame ends in stream
		var crcs []uint32
		for i := range 300 {
			var n int
			switch k := rng.IntN(8); {
			case k < 2:
				n = 1 + rng.IntN(100)
			case k < 5:
				n = 1 + rng.IntN(200<<10)
			case k < 7:
				n = 60<<10 + rng.IntN(10<<10) // around gnet's 64 KiB read buffer
			default:
				n = 1 + rng.IntN(12<<20)
			}
			off := rng.IntN(len(random) - n)
			payload := random[off : off+n]
			crcs = append(crcs, crc32.ChecksumIEEE(payload))
			req := wire.Request{Header: wire.RequestHeader{APIKey: wire.APIProduce, RequestID: uint32(i)},
				Body: &wire.ProduceRequest{Topic: []byte("t"), Version: 1, Batches: payload}}
			stream = req.AppendTo(stream)
			ends = append(ends, len(stream))
		}
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		answered := make(chan int, len(ends)) // frames answered so far, after each answer
		go func() {
			done, pos := 0, 0
			for pos < len(stream) {
				limit := pos
				for j := done; j < len(ends) && ends[j]-start(ends, done) <= 24<<20; j++ {
					limit = ends[j]
				}
				if limit == pos {
					done = <-answered
					continue
				}
				n := min(limit-pos, 1+rng.IntN(300<<10))
				if _, err := c.Write(stream[pos : pos+n]); err != nil {
					return
				}
				pos += n
			}
		}()
		r := bufio.NewReader(c)
		c.SetReadDeadline(time.Now().Add(time.Minute))
		for i, want := range crcs {
			resp, err := readAnswer(r)
			if err != nil {
				t.Fatalf("inflight %d: answer %d: %v", inflight, i, err)
			}
			body, _ := resp.Body.(*wire.ProduceResponse)
			if resp.Header.Code != wire.CodeNone || resp.Header.RequestID != uint32(i) || uint32(body.BaseOffset) != want {
				t.Fatalf("inflight %d: answer %d: request %d, code %v %s, want crc %x", inflight, i,
					resp.Header.RequestID, resp.Header.Code, resp.Text, want)
			}
			answered <- i + 1
		}
		c.Close()
		st := settled(t, s)
		if st.Requests != uint64(len(crcs)) || st.InboundBuffered != 0 || st.OutboundQueued != 0 || st.OutboundReserved != 0 {
			t.Fatalf("inflight %d: %+v", inflight, st)
		}
		if inflight == 1 && st.PausedInflight == 0 {
			t.Fatal("one request in flight, and the connection never stopped taking requests")
		}
		if st.InboundIdle > 16<<20 {
			t.Fatalf("the pool keeps %d bytes", st.InboundIdle)
		}
	}
}

// settled returns the server's counters once it has seen every connection close: it
// settles its accounts then.
func settled(t *testing.T, s *Server) Stats {
	t.Helper()
	st := s.Stats()
	for deadline := time.Now().Add(time.Minute); st.Connections != 0; st = s.Stats() {
		if time.Now().After(deadline) {
			t.Fatal("the server did not see the connection close")
		}
		time.Sleep(time.Millisecond)
	}
	return st
}

// start returns where frame i begins in the stream.
func start(ends []int, i int) int {
	if i == 0 {
		return 0
	}
	return ends[i-1]
}

// TestInboundBudgetPolicy: small holdings may use the whole budget, large ones only half
// of it, and no connection more than its cap.
func TestInboundBudgetPolicy(t *testing.T) {
	cfg := Config{MaxInboundTotal: 320 << 20}
	cfg.EnsureDefaults()
	b := newInboundBudget(&cfg) // small: up to 10 MiB; large: 160 MiB together; a connection 130 MiB
	f := func(from, to int64, want refusal) {
		t.Helper()
		if got := b.resize(from, to); got != want {
			t.Fatalf("resize %d -> %d MiB: %v, want %v", from>>20, to>>20, got, want)
		}
	}
	f(0, 131<<20, overConn)
	f(0, 100<<20, admitted) // large
	f(0, 61<<20, overBudget)
	f(0, 59<<20, admitted) // large: 159 MiB
	for range 16 {         // small ones use the rest, past the large half
		f(0, 10<<20, admitted)
	}
	f(0, 2<<20, overBudget) // 319 + 2 > 320
	f(10<<20, 11<<20, overBudget)
	f(59<<20, 0, admitted)
	f(10<<20, 11<<20, admitted) // a small holding turning large, with room in the large half
	if got := b.held(); got != 100<<20+15*10<<20+11<<20 {
		t.Fatalf("held %d", got)
	}
}

// TestBufPool: mappings come in classes, the pool keeps at most its retention, and a
// remapped buffer keeps its bytes.
func TestBufPool(t *testing.T) {
	for n, want := range map[int]int{1: 0, 64 << 10: 0, 64<<10 + 1: 1, 8 << 20: 7, 8<<20 + 1: -1} {
		if got := classOf(n); got != want {
			t.Fatalf("classOf(%d) = %d, want %d", n, got, want)
		}
	}
	p := &bufPool{retain: 1 << 20}
	var ms []mapping
	for range 3 {
		m, err := p.get(512 << 10)
		if err != nil {
			t.Fatal(err)
		}
		m.mem[0], m.touched = 1, 1
		ms = append(ms, m)
	}
	for _, m := range ms {
		p.put(m)
	}
	if p.idle() != 1<<20 {
		t.Fatalf("pool keeps %d bytes, retention 1 MiB", p.idle())
	}
	if m, _ := p.get(300 << 10); len(m.mem) != 512<<10 || m.touched != 1 {
		t.Fatalf("pooled mapping of %d bytes, touched %d", len(m.mem), m.touched)
	}
	var b inbuf
	data := make([]byte, 20<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	for off := 0; off < len(data); off += 1 << 20 {
		g, err := b.plan(p, b.len()+1<<20, b.len()+1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.apply(p, g); err != nil {
			t.Fatal(err)
		}
		b.w += copy(b.mem[b.w:], data[off:off+1<<20])
	}
	if string(b.bytes()) != string(data) || len(b.mem) < len(data) || b.touched != len(data) {
		t.Fatalf("after growing: %d bytes held in a mapping of %d, touched %d", b.len(), len(b.mem), b.touched)
	}
	b.release(p)
	p.close()
	if p.idle() != 0 {
		t.Fatal("closed pool keeps mappings")
	}
}
