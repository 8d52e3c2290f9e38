package test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sluice/batch"
	"sluice/broker"
	"sluice/persist/vfs"
	"sluice/wire"
)

// stressClient is a goroutine-safe-enough raw client for one goroutine (no testing.T
// calls off the test goroutine: errors are returned).
type stressClient struct {
	conn net.Conn
	r    *bufio.Reader
	id   uint32
}

func stressDial(addr string) (*stressClient, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &stressClient{conn: c, r: bufio.NewReaderSize(c, 1<<20)}, nil
}

func (c *stressClient) sendV(body wire.Body, version uint16) (uint32, error) {
	c.id++
	req := wire.Request{Header: wire.RequestHeader{APIKey: body.Key(), APIVersion: version, RequestID: c.id}, Body: body}
	_, err := c.conn.Write(req.AppendTo(nil))
	return c.id, err
}

func (c *stressClient) recvFrame() ([]byte, error) {
	c.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	var lenBuf [4]byte
	if _, err := io.ReadFull(c.r, lenBuf[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(lenBuf[:])
	frame := make([]byte, 4+n)
	copy(frame, lenBuf[:])
	_, err := io.ReadFull(c.r, frame[4:])
	return frame, err
}

func (c *stressClient) recv(multiVersion uint16) (*wire.Response, error) {
	frame, err := c.recvFrame()
	if err != nil {
		return nil, err
	}
	var resp wire.Response
	resp.Body = &wire.FetchMultiResponse{Version: multiVersion}
	if _, err := resp.Decode(frame, wire.DefaultMaxFrame); err != nil {
		return nil, fmt.Errorf("decode %x: %w", frame[:min(len(frame), 64)], err)
	}
	return &resp, nil
}

// TestFetchMultiStress: consumers long-poll fetch_multi over more than mfInline
// partitions (with an unknown one) spread over three shards, in every answer layout,
// pipelined two deep, while one producer per partition appends records whose values name
// their partition and offset; connections that are closed with polls parked churn
// beside them. Every answer must be the one asked, in order, and every record must be
// the one at its offset in its partition.
func TestFetchMultiStress(t *testing.T) {
	b, _ := startInProcessAt(t, t.TempDir(), vfs.Default(), 1<<20, func(c *broker.Config) {
		c.Sched.Shards, c.Sched.QueueLen = 3, 1024
	})
	addr := b.Addr()
	w := dial(t, addr)
	const parts = 6
	createTopic(t, w, "rs", parts)
	createTopic(t, w, "idle", parts)
	createTopic(t, w, "mx", 1)
	_, maxV, _ := wire.APIFetchMulti.Versions()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	fail := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	// onConn runs fn in a goroutine of wg, on a connection of its own closed after it.
	onConn := func(fn func(c *stressClient)) {
		wg.Go(func() {
			c, err := stressDial(addr)
			if err != nil {
				fail(err)
				return
			}
			defer c.conn.Close()
			fn(c)
		})
	}
	var produced [parts]atomic.Int64
	for p := range parts {
		onConn(func(c *stressClient) {
			next := int64(0)
			rnd := rand.New(rand.NewSource(int64(p)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := 1 + rnd.Intn(3)
				var bb batch.Builder
				bb.Reset(nil, -1, -1)
				for i := range n {
					bb.Add(uint16(i), time.Now().UnixMilli(), nil, fmt.Appendf(nil, "p%d-%d", p, next+int64(i)))
				}
				wait := uint32(0)
				if rnd.Intn(4) == 0 {
					wait = 1000
				}
				id, err := c.sendV(&wire.ProduceRequest{Topic: []byte("rs"), Partition: uint32(p), Version: 1, WaitDurableMs: wait, Batches: bb.Finish()}, 0)
				if err != nil {
					fail(err)
					return
				}
				resp, err := c.recv(0)
				if err != nil {
					fail(fmt.Errorf("producer %d: %w", p, err))
					return
				}
				if resp.Header.RequestID != id || resp.Header.Code != wire.CodeNone {
					fail(fmt.Errorf("producer %d: answer %d code %v %q, want %d", p, resp.Header.RequestID, resp.Header.Code, resp.Text, id))
					return
				}
				pr := resp.Body.(*wire.ProduceResponse)
				if pr.BaseOffset != next || pr.LastOffset != next+int64(n)-1 {
					fail(fmt.Errorf("producer %d: offsets %d-%d, want %d-%d", p, pr.BaseOffset, pr.LastOffset, next, next+int64(n)-1))
					return
				}
				next += int64(n)
				produced[p].Store(next)
				time.Sleep(time.Duration(rnd.Intn(3)) * time.Millisecond)
			}
		})
	}
	consumer := func(k int, c *stressClient) {
		rnd := rand.New(rand.NewSource(100 + int64(k)))
		var next [parts]int64
		type sent struct {
			id      uint32
			version uint16
			order   []uint32
		}
		var inflight []sent
		send := func() error {
			order := rnd.Perm(parts + 1) // parts, and one unknown partition
			list := make([]wire.FetchMultiPartition, 0, len(order))
			ids := make([]uint32, 0, len(order))
			for _, o := range order {
				id := uint32(o)
				if o == parts {
					id = 99
				}
				off := int64(0)
				if o < parts {
					off = next[o]
				}
				list = append(list, wire.FetchMultiPartition{Partition: id, Offset: off})
				ids = append(ids, id)
			}
			if rnd.Intn(3) == 0 { // four or fewer: the inline arrays
				k := 1 + rnd.Intn(4)
				list, ids = list[:k], ids[:k]
			}
			v := uint16(rnd.Intn(int(maxV) + 1))
			id, err := c.sendV(&wire.FetchMultiRequest{Topic: []byte("rs"), MaxWaitMs: uint32(rnd.Intn(300)), MaxBytes: uint32(1 + rnd.Intn(400)), Partitions: list}, v)
			inflight = append(inflight, sent{id, v, ids})
			return err
		}
		for {
			select {
			case <-stop:
				return
			default:
			}
			for len(inflight) < 2 {
				if err := send(); err != nil {
					fail(err)
					return
				}
			}
			s := inflight[0]
			inflight = inflight[1:]
			resp, err := c.recv(s.version)
			if err != nil {
				fail(fmt.Errorf("consumer %d: %w", k, err))
				return
			}
			if resp.Header.RequestID != s.id {
				fail(fmt.Errorf("consumer %d: answer to %d, want %d", k, resp.Header.RequestID, s.id))
				return
			}
			if resp.Header.Code != wire.CodeNone {
				fail(fmt.Errorf("consumer %d: code %v %q", k, resp.Header.Code, resp.Text))
				return
			}
			body := resp.Body.(*wire.FetchMultiResponse)
			if len(body.Parts) != len(s.order) {
				fail(fmt.Errorf("consumer %d: %d parts, want %d", k, len(body.Parts), len(s.order)))
				return
			}
			for i := range body.Parts {
				pa := &body.Parts[i]
				if pa.Partition != s.order[i] {
					fail(fmt.Errorf("consumer %d: part %d is partition %d, want %d", k, i, pa.Partition, s.order[i]))
					return
				}
				if pa.Partition == 99 {
					if pa.Code != wire.CodeUnknownPartition {
						fail(fmt.Errorf("consumer %d: unknown partition answered %v", k, pa.Code))
						return
					}
					continue
				}
				if pa.Code != wire.CodeNone {
					fail(fmt.Errorf("consumer %d: partition %d code %v", k, pa.Partition, pa.Code))
					return
				}
				p := pa.Partition
				for rest := pa.Records; len(rest) > 0; {
					var it batch.Iter
					if err := it.Reset(rest); err != nil {
						fail(fmt.Errorf("consumer %d: partition %d: %v", k, p, err))
						return
					}
					for it.Next() {
						r := it.Record()
						if want := fmt.Sprintf("p%d-%d", p, r.Offset); string(r.Value) != want {
							fail(fmt.Errorf("consumer %d: partition %d offset %d holds %q", k, p, r.Offset, r.Value))
							return
						}
						if r.Offset >= next[p] {
							if r.Offset != next[p] {
								fail(fmt.Errorf("consumer %d: partition %d skipped from %d to %d", k, p, next[p], r.Offset))
								return
							}
							next[p]++
						}
					}
					h := it.Header()
					rest = rest[h.Size():]
				}
			}
		}
	}
	for k := range 3 {
		onConn(func(c *stressClient) { consumer(k, c) })
	}
	// Mixed: produce, fetch and fetch_multi pipelined on one connection, so that the
	// connection's kept body changes API from request to request.
	onConn(func(c *stressClient) {
		// Its plain fetches ask for offsets up to 4 in every partition: an offset past a
		// partition's end is rightly answered offset_out_of_range, so it starts once each
		// partition holds five records.
		for p := range parts {
			for produced[p].Load() < 5 {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
				}
			}
		}
		var mxNext int64
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := uint16(i % int(maxV+1))
			pid, _ := c.sendV(&wire.ProduceRequest{Topic: []byte("mx"), Version: 1, Batches: records(-1, -1, "mx", 1+i%3)}, 0)
			fid, _ := c.sendV(&wire.FetchRequest{Topic: []byte("rs"), Partition: uint32(i % parts), Offset: int64(i % 5), MaxBytes: 200}, 0)
			mid, _ := c.sendV(&wire.FetchMultiRequest{Topic: []byte("rs"), MaxBytes: 500, Partitions: []wire.FetchMultiPartition{
				{Partition: uint32(i % parts), Offset: 1}, {Partition: 7}, {Partition: uint32((i + 1) % parts)}, {Partition: uint32((i + 2) % parts), Offset: 2},
				{Partition: uint32((i + 3) % parts)}}[:1+i%5]}, v)
			bad, _ := c.sendV(&wire.FetchMultiRequest{Topic: []byte("bad name!"), Partitions: []wire.FetchMultiPartition{{Partition: 1}}}, v) // a bad field: answered, not fatal
			for _, want := range []uint32{pid, fid, mid, bad} {
				mv := uint16(0)
				if want == mid {
					mv = v
				}
				resp, err := c.recv(mv)
				if err != nil {
					fail(fmt.Errorf("mixed: %w", err))
					return
				}
				if resp.Header.RequestID != want {
					fail(fmt.Errorf("mixed: answer to %d, want %d", resp.Header.RequestID, want))
					return
				}
				switch {
				case want == bad:
					if resp.Header.Code == wire.CodeNone || resp.Header.Code.Fatal() {
						fail(fmt.Errorf("mixed: a bad topic name answered %v", resp.Header.Code))
						return
					}
				case resp.Header.Code != wire.CodeNone:
					fail(fmt.Errorf("mixed: %v answered %v %q", resp.Header.APIKey, resp.Header.Code, resp.Text))
					return
				case want == pid:
					pr := resp.Body.(*wire.ProduceResponse)
					if pr.BaseOffset != mxNext {
						fail(fmt.Errorf("mixed: produce at %d, want %d", pr.BaseOffset, mxNext))
						return
					}
					mxNext = pr.LastOffset + 1
				case want == mid:
					if n := len(resp.Body.(*wire.FetchMultiResponse).Parts); n != 1+i%5 {
						fail(fmt.Errorf("mixed: %d parts, want %d", n, 1+i%5))
						return
					}
				}
			}
		}
	})
	// Churn: connections closed with long polls parked and answers queued.
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			c, err := stressDial(addr)
			if err != nil {
				fail(err)
				return
			}
			list := []wire.FetchMultiPartition{{Partition: 0}, {Partition: 1}, {Partition: 2}, {Partition: 3}, {Partition: 4}, {Partition: 5}}
			for range 3 {
				c.sendV(&wire.FetchMultiRequest{Topic: []byte("idle"), MaxWaitMs: 5000, MaxBytes: 1 << 16, Partitions: list[:1+i%6]}, uint16(i%int(maxV+1)))
			}
			time.Sleep(time.Duration(i%5) * time.Millisecond)
			c.conn.Close()
		}
	})
	select {
	case err := <-errs:
		close(stop)
		wg.Wait()
		t.Fatal(err)
	case <-time.After(15 * time.Second):
	}
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	for p := range parts {
		t.Logf("partition %d: %d records", p, produced[p].Load())
	}
}
