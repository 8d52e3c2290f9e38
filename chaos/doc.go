// Package chaos is `sluice chaos`, the fault-injection harness of RELIABILITY.md: it
// starts real processes on 127.0.0.1 (the sluice binary as brokers and admins; with
// Config.Distributed also a ZooKeeper and a MiniDFSCluster through internal/peer), runs
// a workload of producers and a consumer against them (package client), injects faults
// on a seeded schedule, heals, reads everything back, and hands the history to the queue
// checker (package chaos/check). Run is the whole of it; cmd/sluice only parses flags.
//
// Every process is started with a parent-death signal (SIGKILL) and stopped by its pid
// when Run returns, whether the run finished, failed or was interrupted (its context
// ended). Files: run.go (the run, the fault loop), workload.go and consume.go (writers,
// the live consumer, the read-back), embedded.go, damage.go and diskfull.go (embedded
// mode and its faults), distributed.go and distributed_faults.go (the cluster and its
// faults), proc.go and broker.go (processes by pid), progress.go, result.go, config.go.
//
// # Concurrency
//
// Run drives one run from the calling goroutine: the fault loop, every fault, every
// broker start and kill. The writers and the live consumer are goroutines of their own
// that share only the check.History (safe from any goroutine), the progress clock (an
// atomic) and a copy of the brokers' addresses taken before they start; the supervisor
// of distributed mode's admins is one more, and each admin's process is guarded by the
// admin's lock. Progress lines go through run.logf, serialized by run.logMu.
package chaos
