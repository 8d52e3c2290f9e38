package client_test

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sluice/client"
	"sluice/wire"
)

// metaProxy stands between a client and a real broker for the admin calls: it forwards
// each request frame and its answer, and rewrites the partition addresses of metadata and
// describe_topic answers to addr(n), n counting those answers from 0. It is how a test
// gives a client the empty or stale addresses of a partition that moves.
type metaProxy struct {
	ln       net.Listener
	upstream string
	addr     func(n, part int) string
	answers  atomic.Int64
	wg       sync.WaitGroup
	// edit, when set, may change any answer's body first (in place).
	edit func(body wire.Body)
}

func startMetaProxy(t *testing.T, upstream string, addr func(n, part int) string) *metaProxy {
	t.Helper()
	return startEditProxy(t, upstream, addr, nil)
}

// startEditProxy is startMetaProxy with an edit of every answer (metaProxy.edit).
func startEditProxy(t *testing.T, upstream string, addr func(n, part int) string, edit func(wire.Body)) *metaProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &metaProxy{ln: ln, upstream: upstream, addr: addr, edit: edit}
	var conns sync.Map
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Store(c, true)
			m.wg.Add(1)
			go func() { defer m.wg.Done(); m.serve(c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		conns.Range(func(c, _ any) bool { c.(net.Conn).Close(); return true })
		m.wg.Wait()
	})
	return m
}

// Addr returns the proxy's address.
func (m *metaProxy) Addr() string { return m.ln.Addr().String() }

// serve forwards one client connection until either side closes.
func (m *metaProxy) serve(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", m.upstream)
	if err != nil {
		return
	}
	defer up.Close()
	for {
		req, err := readFrame(c)
		if err != nil {
			return
		}
		if _, err := up.Write(req); err != nil {
			return
		}
		frame, err := readFrame(up)
		if err != nil {
			return
		}
		if _, err := c.Write(m.rewrite(frame)); err != nil {
			return
		}
	}
}

// rewrite returns the answer frame with its partition addresses replaced, if it has any.
func (m *metaProxy) rewrite(frame []byte) []byte {
	var resp wire.Response
	if _, err := resp.Decode(frame, wire.DefaultMaxFrame); err != nil {
		return frame
	}
	if m.edit != nil {
		m.edit(resp.Body)
	}
	switch body := resp.Body.(type) {
	case *wire.MetadataResponse:
		n := int(m.answers.Add(1) - 1)
		for i := range body.Topics {
			for j := range body.Topics[i].Partitions {
				body.Topics[i].Partitions[j].Addr = m.addr(n, j)
			}
		}
	case *wire.DescribeTopicResponse:
		n := int(m.answers.Add(1) - 1)
		for i := range body.Partitions {
			body.Partitions[i].Addr = m.addr(n, i)
		}
	default:
		if m.edit == nil {
			return frame
		}
	}
	return resp.AppendTo(nil)
}

// readFrame reads one whole frame: its length field, then that many bytes.
func readFrame(r io.Reader) ([]byte, error) {
	var lenField [4]byte
	if _, err := io.ReadFull(r, lenField[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(lenField[:])
	if n > wire.DefaultMaxFrame {
		return nil, errors.New("frame too large")
	}
	frame := make([]byte, 4+n)
	copy(frame, lenField[:])
	_, err := io.ReadFull(r, frame[4:])
	return frame, err
}

// TestConsumerRefreshesAddresses: a consumer whose metadata named no broker for its
// partitions (empty: moving) or a broker that is gone (stale) refreshes the metadata
// after its fetches fail, and reads everything from the broker named then; a start at a
// time, whose list_offsets calls fail the same way, too. Before the fix it retried the
// same address until its context ended ("dial tcp: missing address").
func TestConsumerRefreshesAddresses(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b.Addr, "moving", 2)
	p := newProducer(t, b.Addr, "moving")
	ctx := ctxFor(t, 30*time.Second)
	const n = 300
	for i := range n {
		if err := p.Produce(ctx, &client.Record{Key: value(uint64(i), 8), Value: value(uint64(i), 8), Timestamp: 1000 + int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	closeProducer(t, p)
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stale := gone.Addr().String()
	gone.Close() // nothing listens there any more: connections are refused

	for _, tc := range []struct {
		name  string
		wrong string
		start client.StartAt
	}{
		{"empty", "", client.Oldest()},
		{"stale", stale, client.Oldest()},
		{"empty at a time", "", client.AtTime(time.UnixMilli(1000))},
		{"stale at a time", stale, client.AtTime(time.UnixMilli(1000))},
	} {
		// The first two answers (the consumer's describe, then its first refresh) name
		// the wrong address; later ones the broker.
		proxy := startMetaProxy(t, b.Addr, func(n, _ int) string {
			if n < 2 {
				return tc.wrong
			}
			return b.Addr
		})
		got := consumeAll(t, proxy.Addr(), "moving", n, client.Start(tc.start),
			client.RetryBackoff(time.Millisecond, 20*time.Millisecond))
		if len(got) != n {
			t.Fatalf("%s: read %d records, want %d", tc.name, len(got), n)
		}
		if answers := proxy.answers.Load(); answers < 3 {
			t.Fatalf("%s: %d metadata answers, want at least 3 (describe, two refreshes)", tc.name, answers)
		}
	}
}

// TestConsumerReadsAroundAnUnplacedPartition: while the metadata names no broker for one
// partition (a new partition of an expansion not placed yet, one moving), the consumer
// reads the others, and reads that one too once an address comes. Before the fix the
// fetchers built before the partition without an address were kept but never started,
// and every later Poll waited for their answers until its context ended (found by
// TestClusterExpandUnderLoad under load).
func TestConsumerReadsAroundAnUnplacedPartition(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b.Addr, "unplaced", 2)
	p := newProducer(t, b.Addr, "unplaced")
	ctx := ctxFor(t, 30*time.Second)
	const n = 400
	for i := range n {
		if err := p.Produce(ctx, &client.Record{Key: value(uint64(i), 8), Value: value(uint64(i), 8)}); err != nil {
			t.Fatal(err)
		}
	}
	closeProducer(t, p)
	var placed atomic.Bool // partition 1 has no address until the consumer read all of 0
	proxy := startMetaProxy(t, b.Addr, func(_, part int) string {
		if part == 1 && !placed.Load() {
			return ""
		}
		return b.Addr
	})
	c, err := client.NewConsumer(ctx, "unplaced", client.Brokers(proxy.Addr()), client.Start(client.Oldest()),
		client.FetchMaxWait(50*time.Millisecond), client.RetryBackoff(time.Millisecond, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := client.NewAdmin(client.Brokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	d, err := a.DescribeTopic(ctx, "unplaced")
	a.Close()
	if err != nil {
		t.Fatal(err)
	}
	end0 := d.Partitions[0].NextOffset
	if end0 == 0 || end0 == n {
		t.Fatalf("partition 0 holds %d of %d records: the keys did not spread", end0, n)
	}
	got := map[int]int{}
	for got[0]+got[1] < n {
		if err := c.Poll(ctx); err != nil {
			t.Fatalf("poll after %v records (partition 1 placed: %v): %v", got, placed.Load(), err)
		}
		for c.Next() {
			got[c.Partition()]++
		}
		if err := c.Err(); err != nil {
			t.Fatal(err)
		}
		if !placed.Load() {
			if got[1] > 0 {
				t.Fatalf("read partition 1 while it had no address")
			}
			if int64(got[0]) == end0 {
				placed.Store(true) // every record of 0 read: now 1 gets its broker
			}
		}
	}
	if int64(got[0]) != end0 || got[0]+got[1] != n {
		t.Fatalf("read %v, want %d in all and %d of partition 0", got, n, end0)
	}
}
