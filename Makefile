# The two commands of the README:
#   make run    the embedded default (no ZooKeeper, no HDFS)
#   make test   every test, after installing what the tests need
GO       ?= go
FUZZTIME ?= 5s

.PHONY: run test deps check unit fuzz bench bench-quick bench-sustained bench-latency bench-hdfs bench-storage build chaos

build:
	$(GO) build -o bin/sluice ./cmd/sluice

# The embedded default: one broker process, every topic local, no ZooKeeper, no HDFS.
# DATA, LISTEN and METRICS choose where it keeps its partitions, where it serves and where
# it serves /metrics; ARGS adds broker flags (a LISTEN other than loopback needs TLS and
# authentication in ARGS, or ARGS=-insecure: docs/security.md).
DATA    ?= $(CURDIR)/data
LISTEN  ?= 127.0.0.1:9440
METRICS ?= 127.0.0.1:9441
ARGS    ?=
run: build
	bin/sluice broker -data "$(DATA)" -listen "$(LISTEN)" -metrics "$(METRICS)" $(ARGS)

test: deps check unit fuzz

# Everything the tests need: Go modules, and the HDFS and ZooKeeper the tests run against
# (hadoop-client-minicluster and zookeeper from Maven Central, cached in
# ~/.cache/sluice-peers: needs Java 17 and Maven).
deps:
	$(GO) mod download
	scripts/hdfs-peer >/dev/null
	scripts/zk-peer >/dev/null

# staticcheck (from the Go module proxy, pinned) finds what vet does not: a comparison
# of an expression with itself in a test, code nothing uses.
STATICCHECK ?= v0.8.2
check:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags invariants ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK) ./...

# -timeout: go test's default of 10 minutes a package is too short for the packages that
# start ZooKeeper, HDFS (a NameNode and three DataNodes, each a JVM) and broker processes
# under -race on two cores beside the other packages (package chaos ran past it in CI);
# a package still hung after UNIT_TIMEOUT fails with every goroutine's stack.
UNIT_TIMEOUT ?= 30m
unit:
	SLUICE_HDFS_HOME=$$(scripts/hdfs-peer) SLUICE_ZK_HOME=$$(scripts/zk-peer) $(GO) test -race -tags invariants -count=1 -timeout $(UNIT_TIMEOUT) ./...

# Every fuzz target for FUZZTIME, starting from its checked-in corpus (testdata/fuzz).
fuzz:
	FUZZTIME=$(FUZZTIME) scripts/fuzz-all

# sluice side by side with Kafka and NATS JetStream, and the loopback and disk ceilings:
# installs the peers (Go modules, Maven Central), runs the suite, rewrites the generated
# section of BENCHMARKS.md and docs/bench/*.png. About 35-45 minutes (at most 55).
# bench-quick: no Kafka, small counts, a few minutes. bench-sustained: only the disk
# ceilings and the sustained produce runs, about 15 minutes. bench-storage: the storage
# benchmarks of issue 2. bench-latency: only the latency and consume parts with sluice and
# Kafka (issue 14), three rounds of each latency run, about 14 minutes; ONLY= and
# SYSTEMS= narrow `make bench` the same way.
bench:
	scripts/bench-all

bench-quick:
	QUICK=1 scripts/bench-all

bench-sustained:
	NEW_ONLY=1 scripts/bench-all

bench-latency:
	ONLY=latency,consume SYSTEMS=sluice,kafka scripts/bench-all

# The HDFS tier in one run (issue 12): a MiniDFSCluster, raw colinmarc/hdfs rates,
# produce without and with HDFS shipping, the lag at half load, the catch-up after a
# 60 s outage, cold reads; rewrites the generated HDFS section of BENCHMARKS.md. About
# 6-7 minutes (at most 9). QUICK=1: short runs, a 15 s outage; OUTAGE=30s sets it.
bench-hdfs:
	scripts/bench-hdfs

bench-storage:
	scripts/bench-storage

# The long chaos run (RELIABILITY.md): sluice chaos in embedded mode for CHAOS_TIME, then in
# distributed mode (ZooKeeper, HDFS, two admins, three brokers) for CHAOS_TIME, every
# fault of each mode, about 20-25 minutes in all. Fails on anything the guarantees forbid;
# the results are in bin/chaos-*.json, and a failed run keeps its data and process logs
# (the path is printed). `make test` runs a short one (package chaos's tests).
CHAOS_TIME ?= 10m
chaos: build deps
	bin/sluice chaos --duration $(CHAOS_TIME) --json bin/chaos-embedded.json
	SLUICE_HDFS_HOME=$$(scripts/hdfs-peer) SLUICE_ZK_HOME=$$(scripts/zk-peer) \
		bin/sluice chaos --distributed --duration $(CHAOS_TIME) --interval 3s --hdfs-outage 30s --json bin/chaos-distributed.json
