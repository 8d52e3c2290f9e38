package bench

import "golang.org/x/sys/unix"

// settleWriteback has the kernel write back every dirty page of the page cache, and
// waits for it (sync(2)), before an end-to-end run: no run should pay for the writes of
// the run before it. Kafka's writes stay in the page cache past its run (about 2.4 GB
// at its half load), and the kernel wrote them back during the next system's run: a
// sluice broker's persisters, which write with O_DIRECT, then waited on the disk for
// milliseconds per write. With a buffered write of that size beside a run, sluice's
// p99.9 at 10 000 records/s went from 1.0-1.7 ms to 3.0-13.3 ms
// (docs/bench/latency-notebook.md, 2026-12-06). Sluice's own writes are on disk when its
// run ends, so the sync costs little after its runs and a few seconds after Kafka's.
func settleWriteback() { unix.Sync() }
