package wire

import "strconv"

// This file is the one place where API keys and error codes get their numbers and
// properties (STYLE.md rule 13). docs/protocol.md repeats the tables for readers, and
// TestProtocolDocTables fails when the two disagree.

// APIKey names a request type. It is the first field of a request frame header and is
// echoed in the response.
type APIKey uint16

// The API keys. Numbers are never reused.
const (
	APIProduce       APIKey = 0 // append batches to a partition; carries (V, S), answers (V, S, C)
	APIFetch         APIKey = 1 // read batches from an offset, with long poll
	APIMetadata      APIKey = 2 // topics, partition counts, logical ranges, addresses
	APICreateTopic   APIKey = 3 // create a topic with P partitions and options
	APIDescribeTopic APIKey = 4 // metadata plus options and per-partition state
	APIListOffsets   APIKey = 5 // the offset a timestamp falls at, from the time index
	APIFetchMulti    APIKey = 6 // read batches of several partitions, one long poll and byte budget
	APIAuthenticate  APIKey = 7 // one step of an authentication exchange (SCRAM-SHA-256)
	APIExpandTopic   APIKey = 8 // raise a topic's partition count: new layout, V+1
	APITopicLayouts  APIKey = 9 // a topic's layouts and the switch offsets between them
)

// apis describes every API key, indexed by key: its name, the API versions this package
// encodes and decodes, and constructors for its request and response bodies, which is how
// Request.Decode and Response.Decode dispatch.
var apis = [...]struct {
	name                   string
	minVersion, maxVersion uint16
	request, response      func() Body
}{
	APIProduce: {"produce", 0, 0,
		func() Body { return new(ProduceRequest) }, func() Body { return new(ProduceResponse) }},
	APIFetch: {"fetch", 0, 0,
		func() Body { return new(FetchRequest) }, func() Body { return new(FetchResponse) }},
	APIMetadata: {"metadata", 0, 0,
		func() Body { return new(MetadataRequest) }, func() Body { return new(MetadataResponse) }},
	APICreateTopic: {"create_topic", 0, 0,
		func() Body { return new(CreateTopicRequest) }, func() Body { return new(CreateTopicResponse) }},
	APIDescribeTopic: {"describe_topic", 0, 0,
		func() Body { return new(DescribeTopicRequest) }, func() Body { return new(DescribeTopicResponse) }},
	APIListOffsets: {"list_offsets", 0, 0,
		func() Body { return new(ListOffsetsRequest) }, func() Body { return new(ListOffsetsResponse) }},
	APIFetchMulti: {"fetch_multi", 0, 2,
		func() Body { return new(FetchMultiRequest) }, func() Body { return new(FetchMultiResponse) }},
	APIAuthenticate: {"authenticate", 0, 0,
		func() Body { return new(AuthenticateRequest) }, func() Body { return new(AuthenticateResponse) }},
	APIExpandTopic: {"expand_topic", 0, 0,
		func() Body { return new(ExpandTopicRequest) }, func() Body { return new(ExpandTopicResponse) }},
	APITopicLayouts: {"topic_layouts", 0, 0,
		func() Body { return new(TopicLayoutsRequest) }, func() Body { return new(TopicLayoutsResponse) }},
}

// Known reports whether k is an API key this package knows.
func (k APIKey) Known() bool { return int(k) < len(apis) }

// String returns the API's name, or "api(N)" for an unknown key.
func (k APIKey) String() string {
	if !k.Known() {
		return "api(" + strconv.Itoa(int(k)) + ")"
	}
	return apis[k].name
}

// Versions returns the range of API versions this package speaks for k; ok is false for
// an unknown key.
func (k APIKey) Versions() (minVersion, maxVersion uint16, ok bool) {
	if !k.Known() {
		return 0, 0, false
	}
	return apis[k].minVersion, apis[k].maxVersion, true
}

// NewRequest returns a new, zero request body for k, or nil for an unknown key.
func NewRequest(k APIKey) Body {
	if !k.Known() {
		return nil
	}
	return apis[k].request()
}

// NewResponse returns a new, zero response body for k, or nil for an unknown key.
func NewResponse(k APIKey) Body {
	if !k.Known() {
		return nil
	}
	return apis[k].response()
}

// Code is an error code, carried in every response frame header. CodeNone means success.
type Code uint16

// The error codes. Numbers are never reused; see the table below for their properties.
const (
	CodeNone               Code = 0
	CodeMalformed          Code = 1
	CodeFrameTooLarge      Code = 2
	CodeUnknownAPI         Code = 3
	CodeUnsupportedVersion Code = 4
	CodeInternal           Code = 5
	CodeInvalidTopic       Code = 6
	CodeUnknownTopic       Code = 7
	CodeUnknownPartition   Code = 8
	CodeTopicExists        Code = 9
	CodeInvalidConfig      Code = 10
	CodeNotServing         Code = 11
	CodeVersionMismatch    Code = 12
	CodeSessionMismatch    Code = 13
	CodeBusy               Code = 14
	CodeCorruptBatch       Code = 15
	CodeUnsupportedMagic   Code = 16
	CodeUnknownCodec       Code = 17
	CodeSequenceGap        Code = 18
	CodeOffsetOutOfRange   Code = 19
	CodeTimeout            Code = 20
	CodeNoSpace            Code = 21
	CodeCorruptData        Code = 22
	CodeNotOwner           Code = 23
	CodeTLSRequired        Code = 24
	CodeAuthRequired       Code = 25
	CodeAuthFailed         Code = 26
	CodeNotAuthorized      Code = 27
	CodeTopicChanged       Code = 28
	CodeTooLarge           Code = 29
)

// codes describes every error code, indexed by code:
//   - retriable: the same request may succeed later (perhaps after refreshing metadata or
//     rewinding to C'); otherwise it fails again until the client changes it.
//   - fatal: the broker closes the connection after this answer, and the answer has no
//     API body (the frame ends after the error text). These are the codes for frames the
//     broker could not decode. Answers with other error codes may carry a body.
//   - text: the default error text, used when a response carries none.
var codes = [...]struct {
	name             string
	retriable, fatal bool
	text             string
}{
	CodeNone:               {"none", false, false, "no error"},
	CodeMalformed:          {"malformed", false, true, "malformed frame"},
	CodeFrameTooLarge:      {"frame_too_large", false, true, "frame larger than the broker accepts"},
	CodeUnknownAPI:         {"unknown_api", false, true, "unknown API key"},
	CodeUnsupportedVersion: {"unsupported_version", false, true, "unsupported API version"},
	CodeInternal:           {"internal", true, false, "internal broker error"},
	CodeInvalidTopic:       {"invalid_topic", false, false, "invalid topic name"},
	CodeUnknownTopic:       {"unknown_topic", false, false, "unknown topic"},
	CodeUnknownPartition:   {"unknown_partition", false, false, "unknown partition"},
	CodeTopicExists:        {"topic_exists", false, false, "topic already exists"},
	CodeInvalidConfig:      {"invalid_config", false, false, "invalid topic configuration"},
	CodeNotServing:         {"not_serving", true, false, "partition not served by this broker"},
	CodeVersionMismatch:    {"version_mismatch", true, false, "topic version mismatch"},
	CodeSessionMismatch:    {"session_mismatch", true, false, "partition session mismatch"},
	CodeBusy:               {"busy", true, false, "broker busy: retry after the given delay"},
	CodeCorruptBatch:       {"corrupt_batch", false, false, "corrupt batch"},
	CodeUnsupportedMagic:   {"unsupported_magic", false, false, "unsupported batch format version"},
	CodeUnknownCodec:       {"unknown_codec", false, false, "unknown compression codec"},
	CodeSequenceGap:        {"sequence_gap", false, false, "producer sequence out of order"},
	CodeOffsetOutOfRange:   {"offset_out_of_range", false, false, "offset out of range"},
	CodeTimeout:            {"timeout", true, false, "request timed out"},
	CodeNoSpace:            {"no_space", true, false, "the broker's disk is full"},
	CodeCorruptData:        {"corrupt_data", false, false, "stored data is damaged: an operator must repair the partition"},
	CodeNotOwner:           {"not_owner", true, false, "another broker serves this partition: refresh the metadata"},
	CodeTLSRequired:        {"tls_required", false, true, "this port speaks TLS: connect with TLS"},
	CodeAuthRequired:       {"auth_required", false, false, "this broker requires authentication first"},
	CodeAuthFailed:         {"auth_failed", false, false, "authentication failed: unknown user or wrong password"},
	CodeNotAuthorized:      {"not_authorized", false, false, "not authorized: no grant for this operation on this topic"},
	CodeTopicChanged:       {"topic_changed", false, false, "the topic changed meanwhile (another expansion): describe it and decide again"},
	CodeTooLarge:           {"too_large", false, false, "a batch larger than the broker's memory for a partition can ever hold (arena.size, arena.partition_max): nothing was appended"},
}

// Known reports whether c is an error code this package knows. A client treats an unknown
// code as a non-retriable error whose answer it cannot decode further.
func (c Code) Known() bool { return int(c) < len(codes) }

// String returns the code's name, or "code(N)" for an unknown code.
func (c Code) String() string {
	if !c.Known() {
		return "code(" + strconv.Itoa(int(c)) + ")"
	}
	return codes[c].name
}

// Retriable reports whether a request that failed with c may succeed if sent again.
func (c Code) Retriable() bool { return c.Known() && codes[c].retriable }

// Fatal reports whether c closes the connection: its answer carries only the error text,
// never an API body.
func (c Code) Fatal() bool { return c.Known() && codes[c].fatal }

// Text returns the default error text of c.
func (c Code) Text() string {
	if !c.Known() {
		return "unknown error code " + strconv.Itoa(int(c))
	}
	return codes[c].text
}
