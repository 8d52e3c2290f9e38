package bench

import (
	"errors"
	"fmt"
	"time"

	"sluice/batch"
	"sluice/client"
)

// Config is one workload. Zero fields take the defaults of EnsureDefaults.
type Config struct {
	// System is the driver's name: sluice, kafka, nats, tcp or sendfile.
	System string `json:"system"`
	// SluiceOpts are more options of the sluice driver's clients: TLS, authentication.
	SluiceOpts []client.Opt `json:"-"`
	// Broker is the address of the system's server (host:port).
	Broker string `json:"broker,omitempty"`
	// MetricsAddr is the sluice broker's metrics endpoint (host:port): an e2e run then
	// reads the broker's stages into its breakdown (stages.go). Empty: not read.
	MetricsAddr string `json:"metrics_addr,omitempty"`
	// ServerPid is the server's process id, when the harness knows it: an e2e run then
	// reports the server's processor time with its own (cpu.go). 0: not known.
	ServerPid int `json:"-"`
	// Topic is the topic (Kafka topic, NATS stream, ceiling file) to use.
	Topic string `json:"topic"`
	// RecordSize is the size of each record value in bytes (at least 8: the timestamp).
	RecordSize int `json:"record_size"`
	// BatchBytes is the producer batch size where the system has one.
	BatchBytes int `json:"batch_bytes"`
	// FetchBytes is the sluice consumer's byte budget per fetch answer (FetchMaxBytes);
	// 0 is the client's default.
	FetchBytes int `json:"fetch_bytes,omitempty"`
	// BufferBytes bounds the bytes a sluice producer holds until they are durable
	// (MaxBufferedBytes); 0 is the harness's default, bufferBytesDefault.
	BufferBytes int64 `json:"buffer_bytes,omitempty"`
	// Linger is how long a producer batch waits for more records. 0 is no linger (the
	// sluice client's LowLatency mode: a batch goes out as soon as the producer's sender
	// is free; Kafka's linger.ms=0), not a default.
	Linger time.Duration `json:"linger_ns"`
	// Partitions of the topic when the harness creates it.
	Partitions int `json:"partitions"`
	// Producers and Consumers are the number of each, one goroutine (and client) apiece.
	Producers int `json:"producers"`
	Consumers int `json:"consumers"`
	// Rate is the target rate in records/s over all producers; 0 sends as fast as possible.
	Rate float64 `json:"rate"`
	// Duration bounds the run; Count bounds the records (over all producers). Whichever
	// ends first ends the run; at least one is set.
	Duration time.Duration `json:"duration_ns"`
	Count    int64         `json:"count"`
	// MinBytes makes a produce run sustained: it lasts at least Duration and at least
	// until MinBytes value bytes were sent, whichever is later, but never longer than
	// MaxDuration (required with MinBytes). Count must be 0.
	MinBytes    int64         `json:"min_bytes,omitempty"`
	MaxDuration time.Duration `json:"max_duration_ns,omitempty"`
	// RetentionBytes keeps at most about this many bytes per partition of a topic the
	// harness creates (sluice and Kafka retention.bytes, NATS the stream's MaxBytes
	// divided by the partitions), in segments of SegmentBytes (sluice and Kafka). 0 is the
	// system's default (no limit).
	RetentionBytes int64 `json:"retention_bytes,omitempty"`
	SegmentBytes   int64 `json:"segment_bytes,omitempty"`
	// Compression is the codec name: none, lz4 or zstd (sluice, Kafka).
	Compression string `json:"compression"`
	// FromStart makes consumers read from the oldest record (the page cache, or the
	// memory of a broker that still holds it); otherwise from the tail (new records only).
	FromStart bool `json:"from_start"`
	// Acks is the acknowledgment level the producer waits for, as stated in the report
	// ("leader" for Kafka acks=1, "all", "accepted" for sluice); informational.
	Acks string `json:"acks,omitempty"`
	// Warmup is excluded from an end-to-end run's latency figures.
	Warmup time.Duration `json:"warmup_ns"`
}

// EnsureDefaults fills the zero fields.
func (c *Config) EnsureDefaults() {
	if c.Topic == "" {
		c.Topic = "bench"
	}
	if c.RecordSize == 0 {
		c.RecordSize = 1024
	}
	if c.BatchBytes == 0 {
		c.BatchBytes = 1 << 20
	}
	if c.Partitions == 0 {
		c.Partitions = 1
	}
	if c.Producers == 0 {
		c.Producers = 1
	}
	if c.Consumers == 0 {
		c.Consumers = 1
	}
	if c.Duration == 0 && c.Count == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Compression == "" {
		c.Compression = "none"
	}
}

// Validate reports a field out of range.
func (c *Config) Validate() error {
	switch {
	case c.RecordSize < stampSize:
		return fmt.Errorf("record size %d: at least %d bytes (the timestamp)", c.RecordSize, stampSize)
	case c.BatchBytes < c.RecordSize:
		return fmt.Errorf("batch size %d below the record size %d", c.BatchBytes, c.RecordSize)
	case c.Partitions < 1, c.Producers < 0, c.Consumers < 0:
		return errors.New("partitions must be positive, producers and consumers not negative")
	case c.FetchBytes < 0, c.BufferBytes < 0:
		return errors.New("fetch and buffer bytes must not be negative")
	case c.Rate < 0, c.Duration < 0, c.Count < 0, c.Linger < 0, c.Warmup < 0:
		return errors.New("rate, duration, count, linger and warmup must not be negative")
	case c.Duration == 0 && c.Count == 0:
		return errors.New("set a duration or a count")
	case c.MinBytes < 0, c.MaxDuration < 0, c.RetentionBytes < 0, c.SegmentBytes < 0:
		return errors.New("min bytes, max duration, retention and segment bytes must not be negative")
	case c.MinBytes > 0 && (c.Count > 0 || c.MaxDuration < c.Duration || c.MaxDuration == 0):
		return errors.New("min bytes needs no count and a max duration of at least the duration")
	}
	if _, err := CodecOf(c.Compression); err != nil {
		return err
	}
	return nil
}

// String sums up the workload in one line.
func (c *Config) String() string {
	rate := "max"
	if c.Rate > 0 {
		rate = fmt.Sprintf("%.0f/s", c.Rate)
	}
	return fmt.Sprintf("%s %dB records, batch %d, linger %v, %d partitions, %dp/%dc, rate %s, %s, from_start=%v",
		c.System, c.RecordSize, c.BatchBytes, c.Linger, c.Partitions, c.Producers, c.Consumers, rate, c.Compression, c.FromStart)
}

// CodecOf maps a compression name to the batch codec.
func CodecOf(name string) (batch.Codec, error) {
	switch name {
	case "", "none":
		return batch.CodecNone, nil
	case "lz4":
		return batch.CodecLZ4, nil
	case "zstd":
		return batch.CodecZstd, nil
	}
	return 0, fmt.Errorf("unknown compression %q (none, lz4 or zstd)", name)
}
