package engine

import (
	"fmt"
	"testing"
	"time"

	"sluice/persist/local"
)

// BenchmarkProduce measures Produce itself, in process: one idempotent batch per request
// (the path with the most work per batch: a CRC-32C over the batch, the producer's
// sequence checked, remembered and placed, the bytes copied into the arena), with a
// batch of 1 small record (per-batch costs dominate) and of 63 records of 1 KiB (the
// copy and the checksum dominate). Each round produces 1024 requests from a new producer
// id; the batches are built, and the round persisted, with the timer stopped, as the
// broker's persister runs beside the appenders and not on their path. Retention keeps
// the log to a few 16 MiB segments, so a long run does not fill the disk. check=true is
// the broker's default, every record of each batch decoded (RecordChecker); false is a
// broker that trusts its producers (broker.trust_records).
func BenchmarkProduce(b *testing.B) {
	for _, c := range []struct {
		records, size int
		check         bool
	}{{1, 100, true}, {1, 100, false}, {63, 1000, true}, {63, 1000, false}} {
		b.Run(fmt.Sprintf("records=%d/size=%d/check=%v", c.records, c.size, c.check), func(b *testing.B) {
			a := newArena(b, 256<<20, 1<<20)
			var rc *RecordChecker
			if c.check {
				rc = NewRecordChecker()
			}
			p := openPartitionAt(b, b.TempDir(), a, local.Options{Sync: local.SyncNever, SegmentBytes: 16 << 20, RetentionBytes: 64 << 20}, 1, rc)
			defer p.Close()
			const round = 1024
			reqs := make([][]byte, round)
			build := func(pid int64) {
				for i := range reqs {
					reqs[i] = mkBatch(pid, int32(i*c.records), c.records, c.size)
				}
			}
			now := time.Now()
			pid := int64(1)
			build(pid)
			b.SetBytes(int64(len(reqs[0])))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i > 0 && i%round == 0 {
					b.StopTimer()
					persistNow(b, p)
					if _, err := p.ApplyRetention(); err != nil {
						b.Fatal(err)
					}
					pid++
					build(pid)
					b.StartTimer()
				}
				res, err := p.Produce(1, 1, reqs[i%round], now)
				if err != nil || res.Appended != 1 {
					b.Fatalf("request %d: appended %d: %v", i, res.Appended, err)
				}
			}
		})
	}
}
