package chaos

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"sluice/batch"
)

// Config is one chaos run. Zero fields take the defaults of EnsureDefaults.
type Config struct {
	// Binary is the sluice binary the brokers run (required).
	Binary string
	// Dir holds the run's data directories and process logs (required; created).
	Dir string
	// Duration is how long faults are injected under load (every selected fault is
	// injected once first, however long that takes); healing and the read-back come
	// after it (each bounded).
	Duration time.Duration
	// Interval is the mean time under load between two faults.
	Interval time.Duration
	// Faults are the faults to inject, by name (EmbeddedFaults, DistributedFaults); empty
	// means every fault the mode supports.
	Faults []string
	// Seed makes the fault schedule and the choices inside faults reproducible.
	Seed int64
	// Partitions of the topic the workload writes.
	Partitions int
	// Writers is the number of producers; they cycle through the workload's kinds
	// (async and sync, acks accepted and persisted, keyed and keyless).
	Writers int
	// Rate is the records per second of each asynchronous writer.
	Rate int
	// ValueSize is each record's value size in bytes (at least 24).
	ValueSize int
	// Codecs are the compressions the writers' producers use, in turn: each new
	// producer of writer i (its n-th, from 1) compresses with Codecs[(i+n) % len]. Empty
	// means every codec sluice has (none, zstd, s2, lz4).
	Codecs []batch.Codec
	// ProducerLife is how long a writer keeps one producer before it closes it (waiting
	// for its records to persist) and starts the next, with the next codec: so that every
	// writer kind writes batches of every codec within a few lives, and producers also
	// end cleanly under faults, not only after a failed call. Default 15 s; negative: a
	// producer is kept until a call fails.
	ProducerLife time.Duration
	// Fsync is the brokers' fsync policy (group, batch or never); empty means the
	// broker's default (group).
	Fsync string
	// Distributed runs ZooKeeper, HDFS, two admins and several brokers.
	Distributed bool
	// Session is the ZooKeeper session timeout of the brokers and admins (distributed
	// mode): a broker paused or dead this long loses its partitions.
	Session time.Duration
	// HDFSOutage is how long the hdfs-restart fault keeps HDFS down before starting it
	// again (its start takes seconds more), and how long hdfs-pause keeps it stopped; the
	// same for the NameNode or the DataNode alone (nn-kill, dn-kill, nn-pause, dn-pause).
	HDFSOutage time.Duration
	// DataNodes is how many HDFS DataNodes run, each in its own JVM, every block on all
	// of them (1 to 3; default 3): with one, a DataNode's crash is an outage of the only
	// copy of every block.
	DataNodes int
	// Log receives one line per fault and per notable event; nil discards them.
	Log io.Writer
}

// EmbeddedFaults are the faults of embedded mode (one broker, local disk only).
var EmbeddedFaults = []string{"kill", "pause", "torn", "bitflip", "diskfull", "clockjump"}

// EnsureDefaults fills zero fields with defaults.
func (c *Config) EnsureDefaults() {
	if c.Duration == 0 {
		c.Duration = time.Minute
	}
	if c.Interval == 0 {
		c.Interval = 2 * time.Second
	}
	if c.Partitions == 0 {
		c.Partitions = 4
	}
	if c.Writers == 0 {
		c.Writers = len(writerKinds)
	}
	if c.Rate == 0 {
		c.Rate = 500
	}
	if c.Session == 0 {
		c.Session = 2 * time.Second
	}
	if c.HDFSOutage == 0 {
		c.HDFSOutage = 5 * time.Second
	}
	if c.DataNodes == 0 {
		c.DataNodes = 3
	}
	if c.ValueSize == 0 {
		c.ValueSize = 100
	}
	if c.ProducerLife == 0 {
		c.ProducerLife = 15 * time.Second
	}
	if len(c.Codecs) == 0 {
		c.Codecs = []batch.Codec{batch.CodecNone, batch.CodecZstd, batch.CodecS2, batch.CodecLZ4}
	}
	if len(c.Faults) == 0 {
		c.Faults = c.modeFaults()
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

func (c *Config) modeFaults() []string {
	if c.Distributed {
		return DistributedFaults
	}
	return EmbeddedFaults
}

// Validate reports a configuration that cannot run.
func (c *Config) Validate() error {
	switch {
	case c.Binary == "":
		return fmt.Errorf("chaos: no sluice binary given")
	case c.Dir == "":
		return fmt.Errorf("chaos: no run directory given")
	case c.Duration < 0 || c.Interval <= 0:
		return fmt.Errorf("chaos: duration %v and interval %v must be positive", c.Duration, c.Interval)
	case c.Partitions < 1 || c.Writers < 1 || c.Rate < 1:
		return fmt.Errorf("chaos: partitions %d, writers %d and rate %d must be at least 1", c.Partitions, c.Writers, c.Rate)
	case c.Fsync != "" && c.Fsync != "group" && c.Fsync != "batch" && c.Fsync != "never":
		return fmt.Errorf("chaos: fsync policy %q is not group, batch or never", c.Fsync)
	case c.DataNodes < 1 || c.DataNodes > 3:
		return fmt.Errorf("chaos: %d DataNodes: 1 to 3", c.DataNodes)
	case c.ValueSize < 24:
		return fmt.Errorf("chaos: value size %d is below the 24 bytes of a record's identity", c.ValueSize)
	}
	for _, k := range c.Codecs {
		if k > batch.CodecLZ4 {
			return fmt.Errorf("chaos: codec %v is not one of none, zstd, s2 and lz4", k)
		}
	}
	for _, f := range c.Faults {
		if !slices.Contains(c.modeFaults(), f) {
			return fmt.Errorf("chaos: fault %q is not one of this mode's: %s", f, strings.Join(c.modeFaults(), ", "))
		}
	}
	return nil
}

// String describes the configuration in one line (it heads the report).
func (c *Config) String() string {
	mode := "embedded"
	if c.Distributed {
		mode = "distributed"
	}
	s := fmt.Sprintf("mode=%s duration=%v interval=%v faults=%s seed=%d partitions=%d writers=%d rate=%d/s value=%dB",
		mode, c.Duration, c.Interval, strings.Join(c.Faults, ","), c.Seed, c.Partitions, c.Writers, c.Rate, c.ValueSize)
	names := make([]string, len(c.Codecs))
	for i, k := range c.Codecs {
		names[i] = k.String()
	}
	s += fmt.Sprintf(" compression=%s producer-life=%v", strings.Join(names, ","), c.ProducerLife)
	if c.Fsync != "" {
		s += " fsync=" + c.Fsync
	}
	if c.Distributed {
		s += fmt.Sprintf(" session=%v hdfs-outage=%v datanodes=%d", c.Session, c.HDFSOutage, c.DataNodes)
	}
	return s
}

// DistributedFaults are the faults of distributed mode (ZooKeeper, HDFS, admins and
// several brokers).
var DistributedFaults = []string{"broker-kill", "broker-pause", "broker-hang", "admin-kill", "zk-restart", "hdfs-restart", "hdfs-pause",
	"nn-kill", "dn-kill", "nn-pause", "dn-pause", "clockjump"}
