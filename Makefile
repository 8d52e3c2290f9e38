# The two commands of the README:
#   make run    the embedded default (no ZooKeeper, no HDFS)
#   make test   every test, after installing what the tests need
GO       ?= go
FUZZTIME ?= 5s

.PHONY: run test deps check unit fuzz bench build

build:
	$(GO) build -o bin/sluice ./cmd/sluice

# The embedded default: one broker process, every topic local, no ZooKeeper, no HDFS.
# DATA and LISTEN choose where it keeps its partitions and where it serves.
DATA   ?= $(CURDIR)/data
LISTEN ?= 127.0.0.1:9440
run: build
	bin/sluice broker -data "$(DATA)" -listen "$(LISTEN)" -metrics 127.0.0.1:9441

test: deps check unit fuzz

# Everything the tests need. Today: Go modules. (ZooKeeper, Hadoop and Kafka jars join
# here with the milestone-2 tests.)
deps:
	$(GO) mod download

check:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags invariants ./...

unit:
	$(GO) test -race -tags invariants -count=1 ./...

# Every fuzz target for FUZZTIME, starting from its checked-in corpus (testdata/fuzz).
fuzz:
	FUZZTIME=$(FUZZTIME) scripts/fuzz-all

bench:
	scripts/bench-storage
