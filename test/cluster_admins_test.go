package test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"sluice/internal/testbroker"
)

// TestTwoAdminsAtOnce: two `sluice admin` processes started at the same instant (behind a
// barrier) on a cluster under load: two brokers serving a topic, a producer writing,
// and the admin that placed the topic stopped just before, so that the two race for
// the lead. Exactly one leads at any time: both admins' sluice_admin_leading, sampled
// from their start to the end, are never 1 together, and one leads at the end. The one
// that leads places what changes next (a third broker joins and gets its share), every
// partition ends served by exactly one broker, and every record produced is read back
// exactly once, in order per key.
func TestTwoAdminsAtOnce(t *testing.T) {
	const parts = 6
	c := startCluster(t, 2)
	c.createTopic(t, "two", parts)
	load := startIDLoad(t, "two", c.brokers[0].Addr, c.brokers[1].Addr)
	load.waitSent(t, "records before the admins start", 1000)
	first := c.admins[0].Process
	if err := first.Signal(syscall.SIGTERM); err != nil { // it ends its session: nobody leads
		t.Fatal(err)
	}
	waitFor(t, "the first admin to exit", func() bool { return syscall.Kill(first.Pid, 0) != nil })

	_, logs := startAdmins(t, c.zk.Addr, 6*time.Second, "a2", "a3")
	w := watchLeaders(t, adminMetrics(t, logs[0]), adminMetrics(t, logs[1]))
	waitFor(t, "one admin to lead", func() bool { return w.leaders.Load() == 1 })

	b3 := c.addBroker(t)
	all := []*testbroker.Broker{c.brokers[0], c.brokers[1], b3}
	waitSpread(t, "two", parts, all) // the joining broker got its share
	checkPlacedOnce(t, "two", parts, all)
	load.waitSent(t, "records after the move", 1000)
	checkExactlyOnce(t, "two", load.finish(t), addrsOf(all)...)
	samples, led, both := w.stop()
	t.Logf("%d samples of both admins' leadership, one leading in %d", samples, led)
	if both != "" {
		t.Fatalf("both admins lead (%s):\n%s\n%s", both, logs[0], logs[1])
	}
	if n := strings.Count(logs[0].String()+logs[1].String(), "admin leading"); n != 1 {
		t.Fatalf("the lead was taken %d times, want once:\n%s\n%s", n, logs[0], logs[1])
	}
}

// leaderWatch samples admins' sluice_admin_leading, one after the other, until stopped.
type leaderWatch struct {
	leaders atomic.Int64 // admins leading in the last sample
	done    chan struct{}
	quit    chan struct{}
	once    sync.Once
	samples int
	led     int    // samples with one admin leading
	both    string // the first sample with more than one, described
	err     error
}

// watchLeaders starts sampling the admins whose metrics are at addrs; the test's end
// stops it if the test did not.
func watchLeaders(t testing.TB, addrs ...string) *leaderWatch {
	w := &leaderWatch{done: make(chan struct{}), quit: make(chan struct{})}
	t.Cleanup(func() { w.stop() })
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.quit:
				return
			case <-time.After(10 * time.Millisecond):
			}
			n := 0
			for _, a := range addrs {
				v, err := testbroker.ScrapeValue(a, "sluice_admin_leading")
				if err != nil {
					w.err = err
					return
				}
				n += int(v)
			}
			w.leaders.Store(int64(n))
			w.samples++
			if n == 1 {
				w.led++
			}
			if n > 1 && w.both == "" {
				w.both = fmt.Sprintf("sample %d, %v", w.samples, time.Now().Format("15:04:05.000"))
			}
		}
	}()
	return w
}

// stop ends the sampling and returns how many samples were taken, in how many one admin
// led, and the first in which more than one did ("" for none).
func (w *leaderWatch) stop() (samples, led int, both string) {
	w.once.Do(func() { close(w.quit) })
	<-w.done
	if w.err != nil {
		both = "cannot sample: " + w.err.Error()
	}
	if w.both != "" {
		both = w.both
	}
	return w.samples, w.led, both
}
