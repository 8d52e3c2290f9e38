package wire

import "math"

// TopicOptions are a topic's settings. In a create request 0 means the broker's default;
// in a describe answer the values are the effective ones, defaults resolved.
type TopicOptions struct {
	// RetentionMs keeps segments whose newest record is younger than this; -1 keeps
	// them whatever their age.
	RetentionMs int64
	// RetentionBytes keeps at most this many bytes per partition (whole segments; the
	// active one always stays); -1 means no limit.
	RetentionBytes int64
	// SegmentBytes rolls a segment once it holds this many bytes; it must be positive
	// once resolved.
	SegmentBytes int64
	// SegmentMs rolls a segment once its first record is this old; -1 never rolls by age.
	SegmentMs int64
}

// MaxTopicMs is the largest value of a millisecond option (RetentionMs, SegmentMs): the
// most whole milliseconds a time.Duration (int64 nanoseconds) holds, about 292 years.
const MaxTopicMs = math.MaxInt64 / 1_000_000

// Validate returns a *ProtocolError with CodeInvalidConfig unless every option is 0, -1
// where -1 is allowed, or positive, and the millisecond options are at most MaxTopicMs.
// Other upper bounds are the broker's to check.
func (o *TopicOptions) Validate() error {
	switch {
	case o.RetentionMs < -1 || o.RetentionMs > MaxTopicMs:
		return invalidConfig("retention.ms " + i64toa(o.RetentionMs))
	case o.RetentionBytes < -1:
		return invalidConfig("retention.bytes " + i64toa(o.RetentionBytes))
	case o.SegmentBytes < 0:
		return invalidConfig("segment.bytes " + i64toa(o.SegmentBytes))
	case o.SegmentMs < -1 || o.SegmentMs > MaxTopicMs:
		return invalidConfig("segment.ms " + i64toa(o.SegmentMs))
	}
	return nil
}

func (o *TopicOptions) appendTo(dst []byte) []byte {
	dst = appendI64(dst, o.RetentionMs)
	dst = appendI64(dst, o.RetentionBytes)
	dst = appendI64(dst, o.SegmentBytes)
	return appendI64(dst, o.SegmentMs)
}

func (o *TopicOptions) decode(rd *reader) {
	o.RetentionMs, o.RetentionBytes, o.SegmentBytes, o.SegmentMs = rd.i64(), rd.i64(), rd.i64(), rd.i64()
	if rd.err == nil {
		rd.err = o.Validate()
	}
}

// CreateTopicRequest creates a topic (API key 3).
type CreateTopicRequest struct {
	Name string
	// Partitions is P, the number of physical partitions, in [1, MaxPartitions].
	Partitions uint32
	Options    TopicOptions
}

// Key returns APICreateTopic.
func (r *CreateTopicRequest) Key() APIKey { return APICreateTopic }

// AppendTo appends the request body to dst.
func (r *CreateTopicRequest) AppendTo(dst []byte) []byte {
	dst = appendString(dst, r.Name)
	dst = le.AppendUint32(dst, r.Partitions)
	return r.Options.appendTo(dst)
}

// Decode decodes the request body at the front of b; see Body. A bad name is
// invalid_topic; a partition count out of range or a bad option is invalid_config.
func (r *CreateTopicRequest) Decode(b []byte) (rest []byte, err error) {
	rd := reader{b: b}
	r.Name = rd.topicString()
	r.Partitions = rd.u32()
	if rd.err == nil && (r.Partitions == 0 || r.Partitions > MaxPartitions) {
		rd.err = invalidConfig("partition count " + utoa(uint64(r.Partitions)) + ", want 1 to 65536")
	}
	r.Options.decode(&rd)
	return rd.b, rd.err
}

// CreateTopicResponse answers a create request with the topic's metadata: the new topic
// on success, the existing one with code topic_exists (other errors have no body).
type CreateTopicResponse struct {
	Topic Topic
}

// Key returns APICreateTopic.
func (r *CreateTopicResponse) Key() APIKey { return APICreateTopic }

// AppendTo appends the response body to dst.
func (r *CreateTopicResponse) AppendTo(dst []byte) []byte { return r.Topic.appendTo(dst) }

// Decode decodes the response body at the front of b; see Body.
func (r *CreateTopicResponse) Decode(b []byte) (rest []byte, err error) {
	rd := reader{b: b}
	var in interner
	r.Topic.decode(&rd, &in)
	return rd.b, rd.err
}

// DescribeTopicRequest asks for a topic's metadata, options and partition state (API
// key 4).
type DescribeTopicRequest struct {
	Name string
}

// Key returns APIDescribeTopic.
func (r *DescribeTopicRequest) Key() APIKey { return APIDescribeTopic }

// AppendTo appends the request body to dst.
func (r *DescribeTopicRequest) AppendTo(dst []byte) []byte { return appendString(dst, r.Name) }

// Decode decodes the request body at the front of b; see Body.
func (r *DescribeTopicRequest) Decode(b []byte) (rest []byte, err error) {
	rd := reader{b: b}
	r.Name = rd.topicString()
	return rd.b, rd.err
}

// DescribeTopicResponse answers a describe request (unknown_topic and other errors have
// no body): the topic's metadata, its options, and the state of each partition.
type DescribeTopicResponse struct {
	Name string
	// Version is V, the topic version.
	Version uint32
	// Options are the effective options.
	Options TopicOptions
	// Partitions are the P partitions in id order, as in Topic, with their state.
	Partitions []PartitionState
}

// PartitionState is a partition's metadata and its state on the broker serving it.
type PartitionState struct {
	Partition
	// LogStartOffset is the first offset still stored.
	LogStartOffset int64
	// NextOffset is the high watermark: the offset the next record will get.
	NextOffset int64
	// Checkpoint is C, the highest durable offset, or -1 when none is.
	Checkpoint int64
	// Session is S, the partition's current session; 0 while no broker serves it.
	Session uint64
}

// partitionStateMinSize is the smallest encoded PartitionState.
const partitionStateMinSize = partitionMinSize + 4*8

// Key returns APIDescribeTopic.
func (r *DescribeTopicResponse) Key() APIKey { return APIDescribeTopic }

// AppendTo appends the response body to dst.
func (r *DescribeTopicResponse) AppendTo(dst []byte) []byte {
	dst = appendString(dst, r.Name)
	dst = le.AppendUint32(dst, r.Version)
	dst = r.Options.appendTo(dst)
	dst = le.AppendUint32(dst, uint32(len(r.Partitions)))
	for i := range r.Partitions {
		p := &r.Partitions[i]
		dst = p.Partition.appendTo(dst)
		dst = appendI64(dst, p.LogStartOffset)
		dst = appendI64(dst, p.NextOffset)
		dst = appendI64(dst, p.Checkpoint)
		dst = le.AppendUint64(dst, p.Session)
	}
	return dst
}

// Decode decodes the response body at the front of b; see Body. A partition's offsets
// must keep the order 0 <= log start <= next offset, -1 <= C < next offset.
func (r *DescribeTopicResponse) Decode(b []byte) (rest []byte, err error) {
	rd := reader{b: b}
	r.Name = rd.topicString()
	r.Version = rd.u32()
	r.Options.decode(&rd)
	r.Partitions = make([]PartitionState, partitionCount(&rd, partitionStateMinSize))
	var in interner
	for i := range r.Partitions {
		p := &r.Partitions[i]
		p.Partition.decode(&rd, &in, i, len(r.Partitions))
		p.LogStartOffset, p.NextOffset, p.Checkpoint, p.Session = rd.i64(), rd.i64(), rd.i64(), rd.u64()
		if rd.err == nil {
			rd.err = checkOffsets(p.LogStartOffset, p.NextOffset, p.Checkpoint)
		}
	}
	return rd.b, rd.err
}
