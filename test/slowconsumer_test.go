package test

import (
	"net"
	"testing"
	"time"

	"sluice/internal/testbroker"
	"sluice/wire"
)

// TestSlowAndVanishingConsumers: a consumer that asks for a lot and never reads, and one
// that disconnects in the middle of a sendfile, cost the broker no unbounded memory and
// do not disturb another client.
func TestSlowAndVanishingConsumers(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	w := dial(t, b.Addr)
	createTopic(t, w, "s", 1)
	value := string(make([]byte, 1000))
	for range 64 { // 64 x 64 KiB = 4 MiB
		mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("s"), Version: 1, Batches: records(0, -1, value, 63)}))
	}
	b.Stop()
	b.Restart() // the data is now only in segment files: fetches use sendfile
	w = dial(t, b.Addr)
	before := rss(t, b.Pid())

	// Never reads: 200 fetches of 4 MiB each (the broker caps requests in flight per
	// connection; the rest wait in the socket).
	slow := dial(t, b.Addr)
	for range 200 {
		slow.send(&wire.FetchRequest{Topic: []byte("s"), Offset: 0, MaxBytes: 4 << 20})
	}
	// Reads a little of a large answer, then hangs up, several times.
	for range 20 {
		c, err := net.Dial("tcp", b.Addr)
		if err != nil {
			t.Fatal(err)
		}
		req := wire.Request{Header: wire.RequestHeader{APIKey: wire.APIFetch, RequestID: 1},
			Body: &wire.FetchRequest{Topic: []byte("s"), Offset: 0, MaxBytes: 4 << 20}}
		c.Write(req.AppendTo(nil))
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		c.Read(make([]byte, 1000))
		c.Close()
	}
	// Meanwhile another client is served normally.
	mustOK(t, w.call(&wire.ProduceRequest{Topic: []byte("s"), Version: 1, Batches: records(0, -1, "after", 1)}))
	got := fetchValues(t, w, "s", 0, 64*63)
	if len(got) != 1 || got[0] != "after-0" {
		t.Fatalf("other client got %v", got)
	}
	if grew := rss(t, b.Pid()) - before; grew > 64<<20 {
		t.Fatalf("broker RSS grew by %d MiB with a stalled consumer", grew>>20)
	}
	slow.conn.Close()
	// And the broker still answers after the stalled consumer is gone.
	mustOK(t, w.call(&wire.MetadataRequest{}))
}

// TestFsyncModes runs the produce and fetch round trip, with acks on acceptance and on
// durability, under each fsync policy.
func TestFsyncModes(t *testing.T) {
	for _, mode := range []string{"group", "batch", "never"} {
		t.Run(mode, func(t *testing.T) {
			b := testbroker.Start(t, t.TempDir(), "-log.fsync", mode)
			w := dial(t, b.Addr)
			createTopic(t, w, "m", 2)
			for i, wait := range []uint32{0, 5000} {
				resp := w.call(&wire.ProduceRequest{Topic: []byte("m"), Partition: 1, Version: 1, WaitDurableMs: wait,
					Batches: records(0, -1, "v", 3)})
				mustOK(t, resp)
				pr := resp.Body.(*wire.ProduceResponse)
				if pr.BaseOffset != int64(3*i) || (wait > 0 && pr.Checkpoint < pr.LastOffset) {
					t.Fatalf("produce (wait %d): %+v", wait, pr)
				}
			}
			if got := fetchValues(t, w, "m", 1, 0); len(got) != 6 {
				t.Fatalf("fetched %v", got)
			}
			b.Stop()
			b.Restart()
			w = dial(t, b.Addr)
			if got := fetchValues(t, w, "m", 1, 0); len(got) != 6 {
				t.Fatalf("after restart: %v", got)
			}
		})
	}
}
