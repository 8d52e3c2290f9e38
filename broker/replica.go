package broker

import (
	"fmt"

	"sluice/memarena"
	"sluice/persist/hdfs"
)

// HDFSConfig turns on distributed mode's replica: with Addresses set every partition is
// shipped to HDFS (persist/hdfs) and its checkpoint C waits for HDFS's acknowledgment as
// well as for the local disk (engine/replica.go). Without it nothing changes.
type HDFSConfig struct {
	Addresses []string // hdfs.addr: the NameNode's RPC addresses
	hdfs.ShipperOptions
}

// Enabled reports whether partitions ship to HDFS.
func (c *HDFSConfig) Enabled() bool { return len(c.Addresses) > 0 }

// startShipper starts the shipper when distributed mode is on.
func (b *Broker) startShipper() error {
	if !b.cfg.HDFS.Enabled() {
		return nil
	}
	opts := b.cfg.HDFS.ShipperOptions
	opts.Conn.Addresses = b.cfg.HDFS.Addresses
	opts.Logger = b.cfg.Logger
	s, err := hdfs.NewShipper(opts)
	if err != nil {
		return fmt.Errorf("cannot ship to HDFS: %w", err)
	}
	b.shipper = s
	return nil
}

// ship registers a partition just loaded with the shipper.
func (b *Broker) ship(pt *part) {
	if b.shipper != nil && pt.p != nil {
		b.shipper.Add(pt.topic.meta.Name, pt.id, pt.p.Window().Session, &shipSource{b: b, pt: pt})
	}
}

// shipSource is a partition as the shipper sees it. The shipper reads one partition
// from one worker at a time, so the buffers here are reused without a lock.
type shipSource struct {
	b     *Broker
	pt    *part
	spans []memarena.Span
	buf   []byte // a region read back from the local disk
	out   [][]byte
}

// Bounds returns the partition's first offset and the offset its next batch gets.
func (s *shipSource) Bounds() (int64, int64) {
	w := s.pt.p.Window()
	return w.Start, w.Next
}

// Read returns batches from the arena (no copy) when it still has them, else read back
// from the local segment file.
func (s *shipSource) Read(offset int64, maxBytes int) ([][]byte, func(), error) {
	res, err := s.pt.p.ShipRead(offset, maxBytes, s.spans)
	if err != nil {
		return nil, func() {}, err
	}
	s.out = s.out[:0]
	if len(res.Spans) > 0 {
		s.spans = res.Spans
		for i := range res.Spans {
			s.out = append(s.out, res.Spans[i].Bytes())
		}
		return s.out, func() { res.Release(); clear(s.spans[:cap(s.spans)]) }, nil
	}
	defer res.Region.Release()
	if res.Region.Empty() {
		return nil, func() {}, nil
	}
	if int64(cap(s.buf)) < res.Region.Len {
		s.buf = make([]byte, res.Region.Len)
	}
	buf := s.buf[:res.Region.Len]
	if _, err := res.Region.File.ReadAt(buf, res.Region.Pos); err != nil {
		return nil, func() {}, fmt.Errorf("cannot read %s back to ship it: %w", res.Region.File.Name(), err)
	}
	s.out = append(s.out, buf)
	return s.out, func() {}, nil
}

// Shipped passes HDFS's acknowledgment to the partition and has its shard take the new
// checkpoint (and answer the produces it covers).
func (s *shipSource) Shipped(next int64) { s.b.passShipped(s.pt, next) }
