package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// Driver connects the harness to one system. Implementations: sluice.go, kafka.go,
// nats.go, ceiling.go.
type Driver interface {
	// Prepare creates the topic (stream, file) with the given partitions if it is missing.
	Prepare(ctx context.Context, c *Config) error
	// NewProducer returns a producer of c.Topic configured from c.
	NewProducer(ctx context.Context, c *Config) (Producer, error)
	// NewConsumer returns a consumer of c.Topic, from the start or the tail per c.
	// Consumer i of n reads its share of the partitions where the system allows it.
	NewConsumer(ctx context.Context, c *Config, i, n int) (Consumer, error)
	// Close releases what the driver holds (not the server).
	Close() error
}

// Producer sends records. It is used by one goroutine; ack may run on any goroutine.
type Producer interface {
	// Send queues a copy of value (value may be reused when Send returns). If the driver
	// reports acknowledgments (Acks), ack is called once with the outcome; otherwise
	// ack is never called and failures surface from Flush.
	Send(ctx context.Context, value []byte, ack func(error)) error
	// Acks reports whether Send calls its ack callback.
	Acks() bool
	// Flush sends everything queued and waits until the system acknowledged it.
	Flush(ctx context.Context) error
	Close() error
}

// BatchSender is a Producer that queues several records in one call. produceLoop hands
// such a driver each wake-up's records at once when it reports no acknowledgments.
type BatchSender interface {
	// SendBatch queues a copy of each value, in order (values may be reused when it
	// returns), and returns how many it queued: all of them, or those before a failure,
	// with its error.
	SendBatch(ctx context.Context, values [][]byte) (int, error)
}

// Consumer reads records.
type Consumer interface {
	// Run calls fn with each record value, from one goroutine, until ctx ends or fn
	// returns false. fn must not keep value. Run returns nil when ctx ended or fn stopped
	// it.
	Run(ctx context.Context, fn func(value []byte) bool) error
	Close() error
}

// drivers maps a system name to its constructor, which gets the server's address.
var drivers = map[string]func(addr string) (Driver, error){}

func register(name string, f func(addr string) (Driver, error)) { drivers[name] = f }

// Systems returns the names of the drivers.
func Systems() []string {
	var s []string
	for name := range drivers {
		s = append(s, name)
	}
	sort.Strings(s)
	return s
}

// Open returns the driver of system for the server at addr.
func Open(system, addr string) (Driver, error) {
	f, ok := drivers[system]
	if !ok {
		return nil, fmt.Errorf("unknown system %q (one of %s)", system, strings.Join(Systems(), ", "))
	}
	return f(addr)
}
