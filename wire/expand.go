package wire

import "math"

// ExpandTopicRequest raises a topic's physical partition count (API key 7): the logical
// ranges are split again over Partitions and the topic version V goes up by one
// (docs/cluster.md, "Expansion").
type ExpandTopicRequest struct {
	Name string
	// Partitions is the new P, above the current one and at most MaxPartitions.
	Partitions uint32
}

// Key returns APIExpandTopic.
func (r *ExpandTopicRequest) Key() APIKey { return APIExpandTopic }

// AppendTo appends the request body to dst.
func (r *ExpandTopicRequest) AppendTo(dst []byte) []byte {
	dst = appendString(dst, r.Name)
	return le.AppendUint32(dst, r.Partitions)
}

// Decode decodes the request body at the front of b; see Body. A bad name is
// invalid_topic; a partition count outside [2, MaxPartitions] is invalid_config (whether
// it is above the topic's is the broker's to say).
func (r *ExpandTopicRequest) Decode(b []byte) (rest []byte, err error) {
	rd := reader{b: b}
	r.Name = rd.topicString()
	r.Partitions = rd.u32()
	if rd.err == nil && (r.Partitions < 2 || r.Partitions > MaxPartitions) {
		rd.err = invalidConfig("partition count " + utoa(uint64(r.Partitions)) + ", want 2 to 65536")
	}
	return rd.b, rd.err
}

// ExpandTopicResponse answers an expansion with the topic's new metadata (errors have no
// body). The new partitions' addresses are empty until the admin places them.
type ExpandTopicResponse struct {
	Topic Topic
}

// Key returns APIExpandTopic.
func (r *ExpandTopicResponse) Key() APIKey { return APIExpandTopic }

// AppendTo appends the response body to dst.
func (r *ExpandTopicResponse) AppendTo(dst []byte) []byte { return r.Topic.appendTo(dst) }

// Decode decodes the response body at the front of b; see Body.
func (r *ExpandTopicResponse) Decode(b []byte) (rest []byte, err error) {
	rd := reader{b: b}
	var in interner
	r.Topic.decode(&rd, &in)
	return rd.b, rd.err
}

// TopicLayoutsRequest asks for the history of a topic's partition layouts and the
// switch offsets between them (API key 8).
type TopicLayoutsRequest struct {
	Name string
}

// Key returns APITopicLayouts.
func (r *TopicLayoutsRequest) Key() APIKey { return APITopicLayouts }

// AppendTo appends the request body to dst.
func (r *TopicLayoutsRequest) AppendTo(dst []byte) []byte { return appendString(dst, r.Name) }

// Decode decodes the request body at the front of b; see Body.
func (r *TopicLayoutsRequest) Decode(b []byte) (rest []byte, err error) {
	rd := reader{b: b}
	r.Name = rd.topicString()
	return rd.b, rd.err
}

// TopicLayoutsResponse is a topic's layouts, oldest first: the first is the one it was
// created with, the last the current one. Consumers read a topic that was expanded by
// them (docs/cluster.md): within a logical partition, records of one layout come before
// those of the next.
type TopicLayoutsResponse struct {
	Name    string
	Layouts []Layout
}

// Layout is one partition layout of a topic: from version Version on, Partitions
// physical partitions, partition i serving LogicalRange(i, Partitions).
type Layout struct {
	Version    uint32
	Partitions uint32
	// Switches has, for every partition of the previous layout, the offset at which it
	// changed to this one: its records below were routed by an earlier layout, those from
	// it on by this one (or a later one). -1 while that partition has not switched yet.
	// Empty in the first layout. A new partition's records are all of its first layout.
	Switches []int64
}

// layoutMinSize is the smallest encoded layout: version, partitions, an empty list.
const layoutMinSize = 4 + 4 + 4

// Key returns APITopicLayouts.
func (r *TopicLayoutsResponse) Key() APIKey { return APITopicLayouts }

// AppendTo appends the response body to dst.
func (r *TopicLayoutsResponse) AppendTo(dst []byte) []byte {
	dst = appendString(dst, r.Name)
	dst = le.AppendUint32(dst, uint32(len(r.Layouts)))
	for _, l := range r.Layouts {
		dst = le.AppendUint32(dst, l.Version)
		dst = le.AppendUint32(dst, l.Partitions)
		dst = le.AppendUint32(dst, uint32(len(l.Switches)))
		for _, s := range l.Switches {
			dst = appendI64(dst, s)
		}
	}
	return dst
}

// Decode decodes the response body at the front of b; see Body. There is at least one
// layout; versions and partition counts rise strictly from one layout to the next,
// counts within [1, MaxPartitions]; each layout after the first has one switch offset per
// partition of the one before, each -1 or more.
func (r *TopicLayoutsResponse) Decode(b []byte) (rest []byte, err error) {
	rd := reader{b: b}
	r.Name = rd.topicString()
	n := rd.count(layoutMinSize, math.MaxInt32, "layout")
	if rd.err == nil && n == 0 {
		rd.fail(malformed("topic with no layout"))
	}
	r.Layouts = make([]Layout, 0, n)
	for i := 0; i < n && rd.err == nil; i++ {
		l := Layout{Version: rd.u32(), Partitions: rd.u32()}
		k := rd.count(8, MaxPartitions, "switch offset")
		if rd.err != nil {
			break
		}
		if msg := checkLayout(r.Layouts, &l, k); msg != "" {
			rd.fail(malformed("layout " + itoa(i) + ": " + msg))
			break
		}
		if k > 0 {
			l.Switches = make([]int64, k)
		}
		for j := range l.Switches {
			if l.Switches[j] = rd.i64(); rd.err == nil && l.Switches[j] < -1 {
				rd.fail(malformed("layout " + itoa(i) + ": switch offset below -1"))
			}
		}
		r.Layouts = append(r.Layouts, l)
	}
	return rd.b, rd.err
}

// checkLayout returns what is wrong with l, which follows prev and has k switch offsets
// ("" when nothing is).
func checkLayout(prev []Layout, l *Layout, k int) string {
	switch {
	case l.Partitions < 1 || l.Partitions > MaxPartitions:
		return "partition count " + utoa(uint64(l.Partitions))
	case len(prev) == 0 && k != 0:
		return "switch offsets in the first layout"
	case len(prev) == 0:
		return ""
	}
	last := prev[len(prev)-1]
	switch {
	case l.Version <= last.Version || l.Partitions <= last.Partitions:
		return "version " + utoa(uint64(l.Version)) + " with " + utoa(uint64(l.Partitions)) +
			" partitions does not follow version " + utoa(uint64(last.Version)) + " with " + utoa(uint64(last.Partitions))
	case k != int(last.Partitions):
		return utoa(uint64(k)) + " switch offsets for " + utoa(uint64(last.Partitions)) + " partitions"
	}
	return ""
}
