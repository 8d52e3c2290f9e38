package wire

import "math"

// LogicalRange returns the logical partitions [lo, hi) that physical partition i of p
// serves: [i*65536/p, (i+1)*65536/p). p must be in [1, MaxPartitions] and i in [0, p).
// (The products reach 2^32, hence int64 for 32-bit platforms.)
func LogicalRange(i, p int) (lo, hi int) {
	return int(int64(i) * LogicalPartitions / int64(p)), int(int64(i+1) * LogicalPartitions / int64(p))
}

// PartitionOf returns the physical partition of p that serves logical partition l: the
// i with LogicalRange(i, p) holding l. p must be in [1, MaxPartitions].
func PartitionOf(l uint16, p int) int {
	return int(((int64(l)+1)*int64(p) - 1) / LogicalPartitions)
}

// MetadataRequest asks for the metadata of topics (API key 2).
type MetadataRequest struct {
	// Topics are the names wanted; none means every topic. A name that is not a topic
	// is missing from the answer.
	Topics []string
}

// Key returns APIMetadata.
func (r *MetadataRequest) Key() APIKey { return APIMetadata }

// AppendTo appends the request body to dst.
func (r *MetadataRequest) AppendTo(dst []byte) []byte {
	dst = le.AppendUint32(dst, uint32(len(r.Topics)))
	for _, t := range r.Topics {
		dst = appendString(dst, t)
	}
	return dst
}

// Decode decodes the request body at the front of b; see Body. Every name must be valid.
func (r *MetadataRequest) Decode(b []byte) (rest []byte, err error) {
	rd := reader{b: b}
	n := rd.count(2+1, math.MaxInt32, "metadata topic")
	r.Topics = nil
	if n > 0 {
		r.Topics = make([]string, n)
	}
	for i := range r.Topics {
		r.Topics[i] = rd.topicString()
	}
	return rd.b, rd.err
}

// MetadataResponse answers a metadata request with the topics that exist among those
// asked for, in the order asked (every topic, in name order, when none was named).
type MetadataResponse struct {
	Topics []Topic
}

// Key returns APIMetadata.
func (r *MetadataResponse) Key() APIKey { return APIMetadata }

// AppendTo appends the response body to dst.
func (r *MetadataResponse) AppendTo(dst []byte) []byte {
	dst = le.AppendUint32(dst, uint32(len(r.Topics)))
	for i := range r.Topics {
		dst = r.Topics[i].appendTo(dst)
	}
	return dst
}

// Decode decodes the response body at the front of b; see Body.
func (r *MetadataResponse) Decode(b []byte) (rest []byte, err error) {
	rd := reader{b: b}
	n := rd.count(topicMinSize, math.MaxInt32, "metadata topic")
	r.Topics = nil
	if n > 0 {
		r.Topics = make([]Topic, n)
	}
	var in interner
	for i := range r.Topics {
		r.Topics[i].decode(&rd, &in)
	}
	return rd.b, rd.err
}

// Topic is the metadata of a topic: what a client needs to route messages.
type Topic struct {
	Name string
	// Version is V, the topic version; it changes when the partition count does.
	Version uint32
	// Partitions are the P physical partitions in id order, P in [1, MaxPartitions].
	Partitions []Partition
}

// Partition is the metadata of a physical partition.
type Partition struct {
	// ID is the partition's id, its index in Topic.Partitions.
	ID uint32
	// Lo and Hi bound the logical partitions it serves, [Lo, Hi): always LogicalRange(ID, P).
	Lo, Hi uint32
	// Addr is the address (host:port) of the broker serving it, empty while no broker
	// does (the partition is moving).
	Addr string
}

// NewPartitions returns the p partitions of a topic, with their logical ranges, all
// served by addr. p must be in [1, MaxPartitions].
func NewPartitions(p int, addr string) []Partition {
	parts := make([]Partition, p)
	for i := range parts {
		lo, hi := LogicalRange(i, p)
		parts[i] = Partition{ID: uint32(i), Lo: uint32(lo), Hi: uint32(hi), Addr: addr}
	}
	return parts
}

const (
	// partitionMinSize is the smallest encoded partition: id, lo, hi, empty address.
	partitionMinSize = 4 + 4 + 4 + 2
	// topicMinSize is the smallest encoded topic: a 1-byte name, V, P and one partition.
	topicMinSize = 2 + 1 + 4 + 4 + partitionMinSize
)

// appendTo appends the topic's encoding: name, V, P, then each partition.
func (t *Topic) appendTo(dst []byte) []byte {
	dst = appendString(dst, t.Name)
	dst = le.AppendUint32(dst, t.Version)
	dst = le.AppendUint32(dst, uint32(len(t.Partitions)))
	for i := range t.Partitions {
		dst = t.Partitions[i].appendTo(dst)
	}
	return dst
}

// decode decodes a topic into t.
func (t *Topic) decode(rd *reader, in *interner) {
	t.Name = rd.topicString()
	t.Version = rd.u32()
	t.Partitions = make([]Partition, partitionCount(rd, partitionMinSize))
	for i := range t.Partitions {
		t.Partitions[i].decode(rd, in, i, len(t.Partitions))
	}
}

// partitionCount reads a topic's partition count P, which must be in [1, MaxPartitions],
// with at least minSize bytes left per partition.
func partitionCount(rd *reader, minSize int) int {
	p := rd.count(minSize, MaxPartitions, "partition")
	if rd.err == nil && p == 0 {
		rd.fail(malformed("topic with no partitions"))
	}
	return p
}

func (p *Partition) appendTo(dst []byte) []byte {
	dst = le.AppendUint32(dst, p.ID)
	dst = le.AppendUint32(dst, p.Lo)
	dst = le.AppendUint32(dst, p.Hi)
	return appendString(dst, p.Addr)
}

// decode decodes partition i of a topic's n partitions, which must have id i and the
// logical range LogicalRange(i, n).
func (p *Partition) decode(rd *reader, in *interner, i, n int) {
	p.ID, p.Lo, p.Hi = rd.u32(), rd.u32(), rd.u32()
	p.Addr = in.string(rd.bytes16())
	lo, hi := LogicalRange(i, n)
	if rd.err == nil && (p.ID != uint32(i) || p.Lo != uint32(lo) || p.Hi != uint32(hi)) {
		rd.fail(malformed("partition " + itoa(i) + " of " + itoa(n) + " says id " + utoa(uint64(p.ID)) +
			", range [" + utoa(uint64(p.Lo)) + ", " + utoa(uint64(p.Hi)) + "), want [" + itoa(lo) + ", " + itoa(hi) + ")"))
	}
}

// interner makes one string per distinct broker address in a decoded answer, rather than
// one per partition: most partitions share a few brokers.
type interner struct{ m map[string]string }

func (in *interner) string(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if s, ok := in.m[string(b)]; ok { // the lookup does not allocate
		return s
	}
	if in.m == nil {
		in.m = make(map[string]string)
	}
	s := string(b)
	in.m[s] = s
	return s
}
