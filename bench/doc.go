// Package bench is sluice's load-test harness: it drives a messaging system with a
// produce, consume or end-to-end workload and reports throughput (records/s and MB/s, where
// MB is 10^6 bytes of record values) and latency percentiles.
//
// One Driver interface covers every system measured: sluice (through package client),
// Apache Kafka (franz-go), NATS JetStream (nats.go), and two ceilings that do no messaging
// at all: raw TCP over loopback ("tcp": producers write their records into a socket that
// is drained, consumers read a socket fed from memory) and sendfile over loopback
// ("sendfile": producers append to a plain file, consumers get that file with sendfile).
// The disk ceilings (disk.go) are not drivers: they write 1 MiB blocks to the data
// directory's filesystem, through the page cache and with O_DIRECT, for 3× the host's
// dirty-page limit.
//
// Sustained runs (sustain.go) are produce runs that last a minimum time and a minimum
// number of bytes, whichever is later (Config.MinBytes, bounded by MaxDuration), on
// topics with retention (Config.RetentionBytes), and record the MB/s of every second
// (Result.Series); for sluice, the broker's produced and copied byte counters
// (/metrics) give the copies per produced byte.
//
// Latency. Every record carries, in its first 8 bytes, the time it was meant to be sent.
// At a fixed rate (Config.Rate > 0) that is the pacer's schedule, start + i/rate, not the
// moment Send ran: when the producer falls behind, the records it could not send in time
// count their waiting as latency, so the figures are corrected for coordinated omission
// (Gil Tene's term; the same correction as wrk2). Without a rate the producers send as
// fast as they can and latency is measured from the actual send. Latencies go into
// HdrHistograms (github.com/HdrHistogram/hdrhistogram-go), 1 µs to 1 min, 3 digits.
//
// Files: config.go (the workload), driver.go (the interfaces and the registry), run.go
// (the produce, consume and end-to-end loops and the progress line), pacer.go (fixed-rate
// schedule), latency.go (histograms), result.go (the JSON result), the drivers
// (sluice.go, kafka.go, nats.go, ceiling.go), disk.go (disk ceilings), sustain.go
// (sustained runs, the copy count), report.go and report_sustained.go (the BENCHMARKS.md
// section), chart.go (PNG charts), procs.go and suite.go (starting the systems and
// running the suite that `make bench` runs), suite_latency.go (its end-to-end runs, the
// systems side by side), cpu.go (the processor time of an end-to-end run).
//
// The HDFS tier's benchmarks (`make bench-hdfs`) are apart from the suite: hdfs.go
// starts a MiniDFSCluster (internal/peer/hdfstest) and runs, against it, the raw
// colinmarc/hdfs ceilings (persist/hdfs.RawWrite and RawRead) alternating with produce
// to brokers without and with HDFS shipping, the lag at half load and the cold reads
// (persist/hdfs.ReadCold); hdfs_outage.go the catch-up after HDFS is killed and started
// again; hdfs_samples.go samples the brokers' HDFS metrics and computes lag percentiles
// and the catch-up from them; report_hdfs.go renders the section of BENCHMARKS.md.
//
// Concurrency: a Driver is used from several goroutines (one per producer and consumer);
// each Producer and Consumer it returns is used by one goroutine, except that Send's ack
// callback may run on any goroutine. Recorder and Counters are safe from any goroutine.
package bench
