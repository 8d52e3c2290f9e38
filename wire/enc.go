package wire

import (
	"encoding/binary"
	"math"
)

// Limits of the protocol.
const (
	// MaxTopicLen is the longest topic name, in bytes.
	MaxTopicLen = 249
	// LogicalPartitions is the number of logical partitions of every topic.
	LogicalPartitions = 65536
	// MaxPartitions is the largest number of physical partitions of a topic: one per
	// logical partition.
	MaxPartitions = LogicalPartitions
	// MaxString is the longest string field: its length is a uint16. Encoders cut longer
	// strings (only an error text can reasonably be that long); decoders never see one.
	MaxString = math.MaxUint16
)

var le = binary.LittleEndian

// CheckTopicName returns nil if name is a valid topic name: 1 to MaxTopicLen bytes, each
// one of [a-zA-Z0-9._-], and neither "." nor ".." (names become directory names).
// Otherwise it returns a *ProtocolError with CodeInvalidTopic.
func CheckTopicName[T ~string | ~[]byte](name T) error {
	if len(name) == 0 || len(name) > MaxTopicLen {
		return &ProtocolError{Code: CodeInvalidTopic, Msg: "topic name of " + itoa(len(name)) + " bytes, want 1 to 249"}
	}
	for i := 0; i < len(name); i++ {
		if !topicChar(name[i]) {
			return &ProtocolError{Code: CodeInvalidTopic, Msg: "topic name byte " + itoa(i) + " is not one of [a-zA-Z0-9._-]"}
		}
	}
	if name[0] == '.' && (len(name) == 1 || len(name) == 2 && name[1] == '.') {
		return &ProtocolError{Code: CodeInvalidTopic, Msg: "topic name is . or .."}
	}
	return nil
}

func topicChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '_' || c == '-'
}

// appendString appends a uint16 length and s, cut to MaxString bytes.
func appendString[T ~string | ~[]byte](dst []byte, s T) []byte {
	if len(s) > MaxString {
		s = s[:MaxString]
	}
	dst = le.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

func appendI64(dst []byte, v int64) []byte { return le.AppendUint64(dst, uint64(v)) }

// reader decodes fields from the front of b. Its first error sticks: later reads return
// zero values, so a decoder reads all its fields and checks err once. Running out of bytes
// is ErrShort; the frame-level decoders turn that into a malformed error when the frame
// is whole. A reader lives on its caller's stack: its methods do not let it escape.
type reader struct {
	b   []byte
	err error
}

// take returns the next n bytes, aliasing the input with their capacity cut to n.
func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b) < n {
		r.err = ErrShort
		return nil
	}
	p := r.b[:n:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) u16() uint16 {
	if p := r.take(2); p != nil {
		return le.Uint16(p)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if p := r.take(4); p != nil {
		return le.Uint32(p)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if p := r.take(8); p != nil {
		return le.Uint64(p)
	}
	return 0
}

func (r *reader) i64() int64 { return int64(r.u64()) }

// bytes16 reads a uint16 length and that many bytes, aliased; an empty field is nil.
func (r *reader) bytes16() []byte {
	p := r.take(int(r.u16()))
	if len(p) == 0 {
		return nil
	}
	return p
}

// str reads a uint16 length and that many bytes, copied into a string.
func (r *reader) str() string { return string(r.bytes16()) }

// topic reads a topic name, aliased, and validates it.
func (r *reader) topic() []byte {
	name := r.bytes16()
	if r.err == nil {
		r.err = CheckTopicName(name)
	}
	return name
}

// topicString reads a topic name into a string and validates it.
func (r *reader) topicString() string {
	name := r.topic()
	if r.err != nil {
		return ""
	}
	return string(name)
}

// count reads a uint32 element count and checks it against the bytes left, given the
// smallest encoded element, so that a decoder never allocates for elements that cannot be
// there. limit is the protocol's bound on the count.
func (r *reader) count(minElem, limit int, what string) int {
	n := r.u32()
	switch {
	case r.err != nil:
		return 0
	case uint64(n) > uint64(limit):
		r.err = malformed(what + " count " + utoa(uint64(n)) + " over the limit of " + itoa(limit))
		return 0
	case uint64(n)*uint64(minElem) > uint64(len(r.b)):
		r.err = malformed(what + " count " + utoa(uint64(n)) + " does not fit in the " + itoa(len(r.b)) + " bytes left")
		return 0
	}
	return int(n)
}

// fail records err unless an error is already recorded.
func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}
