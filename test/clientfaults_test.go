package test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sluice/client"
	"sluice/internal/testbroker"
)

// TestClientFrameFaults: a producer and a consumer behind the fault proxy, which cuts
// produce requests and answers mid-frame, resets right after a produce was forwarded and
// drops answers. Every record is produced once; the topic must hold each exactly once, in
// order per partition, and the consumer (through the same faults) must deliver none twice
// and none out of order. It caught the client panicking ("answer for batch N, window has
// M requests in flight": a reconnected sender pipelined on before the windows heard of
// the lost connection), fixed in 09f07ff.
func TestClientFrameFaults(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	px := startFaultProxy(t, b.Addr)
	createFaultTopic(t, b.Addr, "f", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()

	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(7, 11))
	var faults atomic.Int64
	var on atomic.Bool
	px.setPolicy(func(fi frameInfo) verdict {
		if !on.Load() {
			return pass
		}
		mu.Lock()
		x := rng.IntN(1000)
		mu.Unlock()
		var v verdict
		switch {
		case fi.dir == toBroker && fi.api == 0 && fi.nbatch > 0 && x < 30:
			v = cutHalf
		case fi.dir == toBroker && fi.api == 0 && fi.nbatch > 0 && x < 60:
			v = passReset
		case fi.dir == toClient && x < 20:
			v = cutHalf
		case fi.dir == toClient && x < 40:
			v = dropReset
		default:
			return pass
		}
		faults.Add(1)
		return v
	})

	p, err := client.NewProducer(ctx, "f", client.Brokers(px.addr), client.BatchBytes(2<<10),
		client.Linger(time.Millisecond), client.RetryBackoff(5*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewConsumer(ctx, "f", client.Brokers(px.addr), client.FetchMaxWait(100*time.Millisecond),
		client.FetchMaxBytes(8<<10), client.RetryBackoff(5*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	on.Store(true)

	const n = 300000
	consumed := make(chan []faultRec, 1)
	var cerr error
	go func() {
		var out []faultRec
		cctx, ccancel := context.WithTimeout(ctx, 80*time.Second)
		defer ccancel()
		for len(out) < n {
			if err := c.Poll(cctx); err != nil {
				cerr = err
				break
			}
			for c.Next() {
				out = append(out, takeFaultRec(c))
			}
			if err := c.Err(); err != nil {
				cerr = err
				break
			}
		}
		consumed <- out
	}()
	for i := range n {
		key := []byte{byte(i % 13)}
		if err := p.Produce(ctx, &client.Record{Key: key, Value: faultValue(1, uint64(i), 40)}); err != nil {
			t.Fatal(err)
		}
		if i%5000 == 4999 {
			if err := p.WaitPersisted(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := p.Close(ctx); err != nil {
		var ue *client.UnpersistedError
		if errors.As(err, &ue) {
			t.Logf("unpersisted: %d", len(ue.Records))
		}
		t.Fatal(err)
	}
	got := <-consumed
	on.Store(false)
	t.Logf("faults injected: %d; consumer got %d (err %v)", faults.Load(), len(got), cerr)
	if cerr != nil {
		t.Errorf("consumer: %v", cerr)
	}
	dups, _, reorder := checkFaultRecs(got, 1, uint64(len(got)))
	if len(dups) > 0 || len(reorder) > 0 {
		t.Errorf("consumer through faults: %d dups (%v), %d reordered (%v)", len(dups), firstFew(dups), len(reorder), firstFew(reorder))
	}
	recs := readAllFaultRecs(t, b.Addr, "f")
	dups, missing, reorder := checkFaultRecs(recs, 1, n)
	if len(dups) > 0 || len(missing) > 0 || len(reorder) > 0 {
		t.Fatalf("stored: %d dups (%v), %d missing (%v), %d reordered (%v)", len(dups), firstFew(dups),
			len(missing), firstFew(missing), len(reorder), firstFew(reorder))
	}
}

// TestClientResetUnderLoad: the connection is reset right after every 40th produce
// answer went back, while 8 goroutines produce. The producer must reconnect and resend,
// and the topic must hold every record once. It caught the client panicking within
// seconds under -race ("answer for batch N, window has M requests in flight", in
// client/window_answer.go), fixed in 09f07ff.
func TestClientResetUnderLoad(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	px := startFaultProxy(t, b.Addr)
	createFaultTopic(t, b.Addr, "r", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var answers atomic.Int64
	px.setPolicy(func(fi frameInfo) verdict {
		if fi.dir == toClient && fi.api == 0 && answers.Add(1)%40 == 0 {
			return passReset
		}
		return pass
	})
	p, err := client.NewProducer(ctx, "r", client.Brokers(px.addr), client.BatchBytes(1<<10),
		client.Linger(200*time.Microsecond), client.RetryBackoff(time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	n := produceUntil(t, 8, 8*time.Second, func(_ int, seq uint64) error {
		return p.Produce(ctx, &client.Record{Value: faultValue(1, seq, 30)})
	})
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d records, %d answers", n, answers.Load())
	requireOnce(t, readAllFaultRecs(t, b.Addr, "r"), 1, n)
}

// TestClientBrokerKilled: 8 goroutines ProduceSync(AckPersisted) through the proxy,
// which stalls the answers for 1-1.6 s now and then; during each stall the broker is
// killed with SIGKILL and restarted on its data and address, three times. Every
// acknowledged record must be stored once, in order per partition; nothing twice.
func TestClientBrokerKilled(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	px := startFaultProxy(t, b.Addr)
	createFaultTopic(t, b.Addr, "k", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	p, err := client.NewProducer(ctx, "k", client.Brokers(px.addr), client.RetryBackoff(5*time.Millisecond, 100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var acked sync.Map // tag<<32|seq
	var seq atomic.Uint64
	var sent [8]uint64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				seq.Add(1)
				s := sent[g]
				sent[g]++
				key := []byte{byte(g)}
				if _, err := p.ProduceSync(ctx, &client.Record{Key: key, Value: faultValue(uint32(100+g), s, 50)}, client.AckPersisted); err != nil {
					t.Errorf("seq %d: %v", s, err)
					return
				}
				acked.Store(uint64(g)<<32|s, true)
			}
		}()
	}
	for i := range 3 {
		time.Sleep(1500 * time.Millisecond)
		px.stall[toClient].Store(true)
		time.Sleep(time.Duration(1000+300*i) * time.Millisecond)
		b.Kill()
		px.stall[toClient].Store(false)
		time.Sleep(200 * time.Millisecond)
		b.Restart()
	}
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	if err := p.Close(ctx); err != nil {
		var ue *client.UnpersistedError
		if errors.As(err, &ue) {
			t.Errorf("unpersisted %d", len(ue.Records))
		}
		t.Fatal(err)
	}
	recs := readAllFaultRecs(t, b.Addr, "k")
	var dups, reorder []string
	var missing, lostAcked []uint64
	for g := range 8 {
		d, m, r := checkFaultRecs(recs, uint32(100+g), sent[g])
		dups, reorder, missing = append(dups, d...), append(reorder, r...), append(missing, m...)
		for _, x := range m {
			if _, ok := acked.Load(uint64(g)<<32 | x); ok {
				lostAcked = append(lostAcked, x)
			}
		}
	}
	t.Logf("%d sent, %d stored, %d missing (never acknowledged: in flight at a kill)", seq.Load(), len(recs), len(missing))
	if len(dups) > 0 || len(lostAcked) > 0 || len(reorder) > 0 {
		t.Fatalf("%d dups %v; %d acknowledged lost %v; %d reordered %v", len(dups), firstFew(dups),
			len(lostAcked), firstFew(lostAcked), len(reorder), firstFew(reorder))
	}
}

// TestClientStalls: one direction, then the other, stops for 2 or 4 s (past the
// producer's answer timeout with a 1 s dial timeout) while a producer streams keyed
// records and a consumer reads through the same proxy. The consumer must deliver every
// record once and in order per partition, and the topic must hold each once.
func TestClientStalls(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	px := startFaultProxy(t, b.Addr)
	createFaultTopic(t, b.Addr, "s", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	p, err := client.NewProducer(ctx, "s", client.Brokers(px.addr), client.DialTimeout(time.Second),
		client.BatchBytes(4<<10), client.MaxBufferedBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewConsumer(ctx, "s", client.Brokers(px.addr), client.DialTimeout(time.Second),
		client.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 200000
	done := make(chan []faultRec, 1)
	go func() {
		var out []faultRec
		for len(out) < n {
			if err := c.Poll(ctx); err != nil {
				t.Errorf("poll: %v", err)
				break
			}
			for c.Next() {
				out = append(out, takeFaultRec(c))
			}
			if err := c.Err(); err != nil {
				t.Errorf("consumer: %v", err)
				break
			}
		}
		done <- out
	}()
	stallsDone := make(chan struct{})
	go func() {
		defer close(stallsDone)
		for i, d := range []time.Duration{2, 4, 2, 4} {
			time.Sleep(1500 * time.Millisecond)
			px.stall[i%2].Store(true)
			time.Sleep(d * time.Second)
			px.stall[i%2].Store(false)
		}
	}()
	defer func() { <-stallsDone }()
	for i := range n {
		if err := p.Produce(ctx, &client.Record{Key: []byte{byte(i % 7)}, Value: faultValue(1, uint64(i), 100)}); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := <-done
	dups, missing, reorder := checkFaultRecs(got, 1, n)
	if len(dups)+len(missing)+len(reorder) > 0 {
		t.Errorf("consumer: %d dups %v, %d missing %v, %d reordered %v", len(dups), firstFew(dups),
			len(missing), firstFew(missing), len(reorder), firstFew(reorder))
	}
	recs := readAllFaultRecs(t, b.Addr, "s")
	dups, missing, reorder = checkFaultRecs(recs, 1, n)
	if len(dups)+len(missing)+len(reorder) > 0 {
		t.Fatalf("stored: %d dups %v, %d missing %v, %d reordered %v", len(dups), firstFew(dups),
			len(missing), firstFew(missing), len(reorder), firstFew(reorder))
	}
}

// TestClientBlackhole: the broker's address starts accepting connections and never
// answering (and the open connections are reset). Poll must come back within about its
// context, producer and consumer Close within 20 s, and after Close no goroutine of the
// client may remain.
func TestClientBlackhole(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	px := startFaultProxy(t, b.Addr)
	createFaultTopic(t, b.Addr, "bh", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	p, err := client.NewProducer(ctx, "bh", client.Brokers(px.addr), client.DialTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewConsumer(ctx, "bh", client.Brokers(px.addr), client.DialTimeout(time.Second), client.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := p.ProduceSync(ctx, &client.Record{Value: faultValue(1, uint64(i), 20)}, client.AckPersisted); err != nil {
			t.Fatal(err)
		}
	}
	for got := 0; got < 100; {
		if err := c.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		for c.Next() {
			got++
		}
	}
	px.blackhole.Store(true)
	px.resetAll()

	// Records produced now are never answered.
	for i := range 10 {
		if err := p.Produce(ctx, &client.Record{Value: faultValue(1, uint64(100+i), 20)}); err != nil {
			t.Fatal(err)
		}
	}
	pctx, pcancel := context.WithTimeout(ctx, 8*time.Second)
	start := time.Now()
	err = c.Poll(pctx)
	pcancel()
	t.Logf("Poll on a blackhole: %v after %v", err, time.Since(start).Round(time.Millisecond))
	if time.Since(start) > 12*time.Second {
		t.Errorf("Poll took %v with a context of 8s", time.Since(start))
	}
	wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
	start = time.Now()
	err = p.WaitPersisted(wctx)
	wcancel()
	t.Logf("WaitPersisted on a blackhole: %v after %v", err, time.Since(start).Round(time.Millisecond))

	done := make(chan struct{})
	go func() {
		defer close(done)
		cctx, ccancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer ccancel()
		start := time.Now()
		err := p.Close(cctx)
		var ue *client.UnpersistedError
		t.Logf("producer Close: unpersisted %v (%v) after %v", errors.As(err, &ue), err != nil, time.Since(start).Round(time.Millisecond))
		start = time.Now()
		c.Close()
		t.Logf("consumer Close after %v", time.Since(start).Round(time.Millisecond))
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("Close hangs:\n%s", strings.Join(clientGoroutines(), "\n"))
	}
	time.Sleep(2 * time.Second)
	if gs := clientGoroutines(); len(gs) > 0 {
		t.Fatalf("%d client goroutines left after Close:\n%s", len(gs), strings.Join(gs, "\n"))
	}
}

// TestClientCloseAfterResets: the network resets the producer's connections (the one
// carrying empty produces after every third answer, the data one after every 50th)
// while 16 goroutines ProduceSync(AckPersisted). Close(ctx) must return within about its
// context.
func TestClientCloseAfterResets(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	px := startFaultProxy(t, b.Addr)
	createFaultTopic(t, b.Addr, "c", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var polls sync.Map // proxied connection id -> carries empty produces
	var n atomic.Int64
	px.setPolicy(func(fi frameInfo) verdict {
		if fi.dir == toBroker && fi.api == 0 && fi.nbatch == 0 {
			polls.Store(fi.conn, true)
		}
		if fi.dir == toClient && fi.api == 0 {
			if _, ok := polls.Load(fi.conn); ok && n.Add(1)%3 == 0 {
				return passReset
			}
			if n.Add(1)%50 == 0 {
				return passReset
			}
		}
		return pass
	})
	p, err := client.NewProducer(ctx, "c", client.Brokers(px.addr), client.RetryBackoff(time.Millisecond, 5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	records := produceUntil(t, 16, 10*time.Second, func(_ int, seq uint64) error {
		_, err := p.ProduceSync(ctx, &client.Record{Value: faultValue(1, seq, 30)}, client.AckPersisted)
		return err
	})
	closeWithin(t, p, 20*time.Second, fmt.Sprintf("after %d records", records))
}

// TestClientCloseAfterDataResets: 16 producers whose data connection is reset right
// after each answer went back (nothing of theirs is lost in flight), in an application
// that allocates all the time (garbage collections and assists). Each Close(ctx) must
// return within about its context.
func TestClientCloseAfterDataResets(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	px := startFaultProxy(t, b.Addr)
	createFaultTopic(t, b.Addr, "l", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var polls sync.Map
	px.setPolicy(func(fi frameInfo) verdict {
		if fi.dir == toBroker && fi.api == 0 && fi.nbatch == 0 {
			polls.Store(fi.conn, true)
		}
		if fi.dir == toClient && fi.api == 0 {
			if _, ok := polls.Load(fi.conn); !ok {
				return passReset // the data connection, after its answer
			}
		}
		return pass
	})
	var ps []*client.Producer
	for range 16 {
		p, err := client.NewProducer(ctx, "l", client.Brokers(px.addr), client.RetryBackoff(100*time.Microsecond, time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	defer debug.SetGCPercent(debug.SetGCPercent(5))
	var sink atomic.Pointer[[]byte]
	n := produceUntil(t, len(ps)+2, 10*time.Second, func(i int, seq uint64) error {
		if i >= len(ps) { // two goroutines that only allocate
			b := make([]byte, 64<<10)
			sink.Store(&b)
			return nil
		}
		_, err := ps[i].ProduceSync(ctx, &client.Record{Value: faultValue(1, seq, 30)}, client.AckAccepted)
		return err
	})
	px.setPolicy(nil)
	for i, p := range ps {
		closeWithin(t, p, 15*time.Second, fmt.Sprintf("producer %d", i))
	}
	t.Logf("%d sequence numbers taken (the allocating goroutines' among them)", n)
}

// TestClientSyncOffsetsUnderResends: ProduceSync's Result.Offset is the record's offset
// or -1, never another record's. Many ProduceSync calls in flight through the fault
// proxy, which drops 4 % of produce answers and resets the connection (so resends carry
// more than the broker's 8 remembered batches of the producer), and a second producer
// writing to the same partition straight to the broker: every offset reported must hold
// the record it was reported for. It caught the client taking a resend's answer as exact
// when the other producer's records in its span happened to number as many as the
// batches the broker no longer remembered (112-275 wrong offsets a run): a resent batch's
// offsets are never exact now.
func TestClientSyncOffsetsUnderResends(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	px := startFaultProxy(t, b.Addr)
	createFaultTopic(t, b.Addr, "o", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(7, 3))
	px.setPolicy(func(fi frameInfo) verdict {
		if fi.dir != toClient || fi.api != 0 {
			return pass
		}
		mu.Lock()
		defer mu.Unlock()
		if rng.IntN(100) < 4 {
			return dropReset
		}
		return pass
	})
	p1, err := client.NewProducer(ctx, "o", client.Brokers(px.addr), client.RetryBackoff(time.Millisecond, 5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	p2, err := client.NewProducer(ctx, "o", client.Brokers(b.Addr), client.LowLatency())
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var other sync.WaitGroup
	other.Add(1)
	go func() { // the interleaving producer
		defer other.Done()
		for i := uint64(0); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := p2.ProduceSync(ctx, &client.Record{Value: faultValue(2, i, 20)}, client.AckAccepted); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var reported sync.Map // seq → offset
	var withOffset atomic.Uint64
	n := produceUntil(t, 32, 10*time.Second, func(_ int, seq uint64) error {
		res, err := p1.ProduceSync(ctx, &client.Record{Value: faultValue(1, seq, 20)}, client.AckAccepted)
		if err == nil && res.Offset >= 0 {
			withOffset.Add(1)
			reported.Store(seq, res.Offset)
		}
		return err
	})
	close(stop)
	other.Wait()
	if err := p1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	recs := readAllFaultRecs(t, b.Addr, "o")
	at := map[int64]faultRec{}
	for _, r := range recs {
		at[r.offset] = r
	}
	var wrong []string
	reported.Range(func(k, v any) bool {
		s, off := k.(uint64), v.(int64)
		if r := at[off]; r.tag != 1 || r.seq != s {
			wrong = append(wrong, fmt.Sprintf("seq %d reported at %d, which holds tag %d seq %d", s, off, r.tag, r.seq))
		}
		return true
	})
	t.Logf("%d records, %d with an offset reported", n, withOffset.Load())
	if withOffset.Load() == 0 {
		t.Fatal("no offset reported at all: the test shows nothing")
	}
	if len(wrong) > 0 {
		t.Fatalf("%d wrong offsets %v", len(wrong), firstFew(wrong))
	}
	requireOnce(t, recs, 1, n)
}

// TestClientResendAfterRestartWithinHorizon: a producer's batch is appended but its
// answers are held up (the fault proxy stalls the broker-to-client direction); another
// producer writes 70 MiB to the same partition; the broker is killed (kill -9) and
// restarted on the same data; the first producer reconnects, learns the new session and
// resends its batch, which must be acknowledged as a duplicate, not stored again. With
// the default log.dedup_horizon (64 MiB) the restarted broker no longer remembers the
// producer and stores the record twice (RELIABILITY.md states the limit); the broker here
// reads 256 MiB at load, and the test holds it to that.
func TestClientResendAfterRestartWithinHorizon(t *testing.T) {
	b := testbroker.Start(t, t.TempDir(), "-log.dedup_horizon", "256MiB")
	px := startFaultProxy(t, b.Addr)
	createFaultTopic(t, b.Addr, "h", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	p1, err := client.NewProducer(ctx, "h", client.Brokers(px.addr))
	if err != nil {
		t.Fatal(err)
	}
	px.stall[toClient].Store(true) // the answers to p1 wait
	if err := p1.Produce(ctx, &client.Record{Value: faultValue(1, 0, 100)}); err != nil {
		t.Fatal(err)
	}
	a, err := client.NewAdmin(client.Brokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for { // p1's record is in the log
		d, err := a.DescribeTopic(ctx, "h")
		if err != nil {
			t.Fatal(err)
		}
		if d.Partitions[0].NextOffset >= 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	p2, err := client.NewProducer(ctx, "h", client.Brokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 1<<20-200)
	for i := range 70 {
		copy(big, faultValue(2, uint64(i), 12))
		if err := p2.Produce(ctx, &client.Record{Value: big}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b.Kill()
	b.Restart()
	px.stall[toClient].Store(false)
	px.resetAll()
	if err := p1.WaitPersisted(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	requireOnce(t, readAllFaultRecs(t, b.Addr, "h"), 1, 1)
}
