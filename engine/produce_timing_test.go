package engine

import (
	"fmt"
	"testing"
	"time"

	"sluice/batch"
	"sluice/codec"
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
			produceRounds(b, p, 1, func(pid int64, i int) []byte { return mkBatch(pid, int32(i*c.records), c.records, c.size) })
		})
	}
}

// BenchmarkProduceMultiBatch is BenchmarkProduce with requests of four batches of 63
// records of 1000 bytes (one producer's, sequences continuing), checked: a request of
// several batches takes the write buffer's room for all of them first (Partition.hold,
// so that a full arena refuses it whole), which one batch does not.
func BenchmarkProduceMultiBatch(b *testing.B) {
	a := newArena(b, 256<<20, 1<<20)
	p := openPartitionAt(b, b.TempDir(), a, local.Options{Sync: local.SyncNever, SegmentBytes: 16 << 20, RetentionBytes: 64 << 20}, 1, NewRecordChecker())
	defer p.Close()
	const n, records = 4, 63
	produceRounds(b, p, n, func(pid int64, i int) []byte {
		var req []byte
		for j := range n {
			req = append(req, mkBatch(pid, int32((i*n+j)*records), records, 1000)...)
		}
		return req
	})
}

// produceRounds runs b.N produce requests of n batches each on p, in rounds of 1024
// requests from a new producer id (mk builds request i of producer pid); the requests
// are built, and each round persisted and its retention applied, with the timer stopped.
func produceRounds(b *testing.B, p *Partition, n int, mk func(pid int64, i int) []byte) {
	const round = 1024
	reqs := make([][]byte, round)
	build := func(pid int64) {
		for i := range reqs {
			reqs[i] = mk(pid, i)
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
		if err != nil || res.Appended != n {
			b.Fatalf("request %d: appended %d: %v", i, res.Appended, err)
		}
	}
}

// BenchmarkProduceParallel is BenchmarkProduce's checked batches from two appenders at
// once, one partition, as two event loops produce for two producers of one partition:
// each goroutine its own producer id, the round's requests built, and the round
// persisted, with the timer stopped. What it shows is how much of an append the two
// can overlap: the batches' CRCs and record checks run before the append lock
// (produceLocking), so they do not wait for each other's; only the sequences, the
// placing and the copy do. With uncompressed batches the copy is most of an append, and
// the two wait for each other's anyway; a zstd batch is decompressed to be checked,
// which the two can overlap.
func BenchmarkProduceParallel(b *testing.B) {
	const appenders = 2
	for _, c := range []struct {
		records, size int
		codec         batch.Codec
	}{{1, 100, batch.CodecNone}, {63, 1000, batch.CodecNone}, {63, 1000, batch.CodecZstd}} {
		mk := func(pid int64, seq int32) []byte { return mkBatch(pid, seq, c.records, c.size) }
		if c.codec != batch.CodecNone {
			var comp codec.Compressor
			mk = func(pid int64, seq int32) []byte {
				var bb batch.Builder
				bb.Reset(nil, pid, seq)
				for i := range c.records {
					v := fmt.Appendf(nil, "p%d-s%d-", pid, int(seq)+i)
					bb.Add(uint16(i), 1_700_000_000_000+int64(seq)+int64(i), nil, append(v, make([]byte, max(0, c.size-len(v)))...))
				}
				return comp.Finish(&bb, c.codec)
			}
		}
		b.Run(fmt.Sprintf("records=%d/size=%d/codec=%v", c.records, c.size, c.codec), func(b *testing.B) {
			a := newArena(b, 512<<20, 1<<20)
			p := openPartitionAt(b, b.TempDir(), a, local.Options{Sync: local.SyncNever, SegmentBytes: 16 << 20, RetentionBytes: 64 << 20}, 1, NewRecordChecker())
			defer p.Close()
			const round = 512 // requests per appender and round
			reqs := make([][][]byte, appenders)
			pid := int64(0)
			build := func() {
				for g := range reqs {
					pid++
					reqs[g] = reqs[g][:0]
					for i := range round {
						reqs[g] = append(reqs[g], mk(pid, int32(i*c.records)))
					}
				}
			}
			now := time.Now()
			b.SetBytes(int64(len(mk(1, 0))))
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; {
				b.StopTimer()
				if done > 0 {
					persistNow(b, p)
					if _, err := p.ApplyRetention(); err != nil {
						b.Fatal(err)
					}
				}
				build()
				n := min(b.N-done, appenders*round)
				errs := make(chan error, appenders)
				b.StartTimer()
				for g := range appenders {
					go func(reqs [][]byte) {
						for _, r := range reqs {
							if res, err := p.Produce(1, 1, r, now); err != nil || res.Appended != 1 {
								errs <- fmt.Errorf("appended %d: %v", res.Appended, err)
								return
							}
						}
						errs <- nil
					}(reqs[g][:(n+appenders-1-g)/appenders])
				}
				for range appenders {
					if err := <-errs; err != nil {
						b.Fatal(err)
					}
				}
				done += n
			}
		})
	}
}

// BenchmarkProduceHeld is BenchmarkProduce's checked batch of 63 records of 1 KiB,
// stamped with its layout, on a partition that holds stamped records to its logical
// range (held=true: PartitionConfig.Partitions set) and on one that does not: the cost
// of the range check, one comparison per record in the records walk and one atomic
// load per request (benchstat -col /held).
func BenchmarkProduceHeld(b *testing.B) {
	for _, held := range []bool{false, true} {
		b.Run(fmt.Sprintf("held=%v", held), func(b *testing.B) {
			a := newArena(b, 256<<20, 1<<20)
			l, err := local.Open(b.TempDir(), local.Options{Sync: local.SyncNever, SegmentBytes: 16 << 20, RetentionBytes: 64 << 20})
			if err != nil {
				b.Fatal(err)
			}
			cfg := PartitionConfig{Topic: "t", ID: 0, Version: 1, Session: 1, Records: NewRecordChecker()}
			if held {
				cfg.Partitions = 1
			}
			p, err := Open(cfg, l, a)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			produceRounds(b, p, 1, func(pid int64, i int) []byte {
				var bb batch.Builder
				bb.Reset(nil, pid, int32(i*63))
				bb.SetLayout(1)
				for j := range 63 {
					v := fmt.Appendf(nil, "p%d-s%d-", pid, i*63+j)
					bb.Add(uint16(j*1000), 1_700_000_000_000+int64(j), nil, append(v, make([]byte, 1000-len(v))...))
				}
				return bb.Finish()
			})
		})
	}
}
