package test

import (
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"sluice/internal/testbroker"
	"sluice/wire"
)

// raiseFDLimit lifts the soft open-file limit to the hard one and returns it; the broker
// child process inherits it.
func raiseFDLimit(t testing.TB) uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = lim.Max
	syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	return lim.Cur
}

// rss returns a process's resident set size in bytes.
func rss(t testing.TB, pid int) int64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// openIdle opens n connections that never send anything.
func openIdle(t testing.TB, addr string, n int) []net.Conn {
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	return conns
}

// idleConns is how many idle connections the tests hold: the 10 000, fewer only
// if the host's hard limit on open files cannot hold them (said in the log).
func idleConns(t testing.TB) int {
	n := 10000
	if lim := raiseFDLimit(t); lim < uint64(n)+200 { // each process (test, broker) holds n
		n = int(lim) - 200
		t.Logf("open-file hard limit %d: holding %d idle connections, not 10000", lim, n)
	}
	return n
}

// TestManyIdleConnections holds ten thousand idle connections open and checks that the
// broker keeps serving another client, and that their memory stays bounded.
func TestManyIdleConnections(t *testing.T) {
	n := idleConns(t)
	b := testbroker.Start(t, t.TempDir())
	w := dial(t, b.Addr)
	createTopic(t, w, "idle", 1)
	before := rss(t, b.Pid())
	openIdle(t, b.Addr, n)
	mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("idle"), Version: 1, Batches: records(0, -1, "r", 3)}))
	if got := fetchValues(t, w, "idle", 0, 0); len(got) != 3 {
		t.Fatalf("with %d idle connections the broker returned %v", n, got)
	}
	per := float64(rss(t, b.Pid())-before) / float64(n)
	t.Logf("%d idle connections: %.0f bytes of broker RSS each", n, per)
	// Bounded memory, not a speed goal: a leak of a buffer per connection would be 64 KiB+.
	if per > 32<<10 {
		t.Fatalf("%.0f bytes per idle connection", per)
	}
}

// BenchmarkIdleConnections reports the broker's resident memory per idle connection
// (goal: at most 10 KiB).
func BenchmarkIdleConnections(b *testing.B) {
	n := idleConns(b)
	br := testbroker.Start(b, b.TempDir())
	before := rss(b, br.Pid())
	for i := 0; i < b.N; i++ {
		conns := openIdle(b, br.Addr, n)
		w := dial(b, br.Addr) // a round trip makes sure the broker has seen them all
		w.call(&wire.MetadataRequest{})
		b.ReportMetric(float64(rss(b, br.Pid())-before)/float64(n), "rss-bytes/conn")
		for _, c := range conns {
			c.Close()
		}
	}
}
