package wire

import (
	"errors"
	"strings"
	"testing"

	"sluice/batch"
)

// testBatches returns two batches of a producer, back to back, as a client sends them.
func testBatches() []byte {
	var b batch.Builder
	b.Reset(nil, 7, 0)
	b.Add(1, 1_700_000_000_000, []byte("k1"), []byte("v1"))
	b.Add(2, 1_700_000_000_005, nil, []byte("v2"))
	buf := b.Finish()
	b.Reset(buf, 7, 2)
	b.Add(65535, 1_700_000_000_010, []byte("k3"), []byte("a longer value"), batch.RecordHeader{Key: []byte("h"), Value: []byte("x")})
	return b.Finish()
}

// storedBatches returns testBatches with base offsets set, as a broker stores them.
func storedBatches(base int64) []byte {
	b := testBatches()
	h, _ := batch.ParseHeader(b)
	batch.SetBaseOffset(b, base)
	batch.SetBaseOffset(b[h.Size():], base+int64(h.Count))
	return b
}

var longTopic = strings.Repeat("t", MaxTopicLen)

// sampleRequests returns requests covering every API and the edges of their fields.
func sampleRequests() map[string]Request {
	req := func(k APIKey, id uint32, body Body) Request {
		return Request{Header: RequestHeader{APIKey: k, RequestID: id}, Body: body}
	}
	return map[string]Request{
		"produce": req(APIProduce, 1, &ProduceRequest{Topic: []byte("orders"), Partition: 3, Version: 2,
			Session: 0x1122334455667788, ProducerID: 7, WaitDurableMs: 250, Batches: testBatches()}),
		"produce-empty": req(APIProduce, 2, &ProduceRequest{Topic: []byte("a"), Version: 1, Session: 9}),
		"produce-first": req(APIProduce, 3, &ProduceRequest{Topic: []byte(longTopic), Partition: 65535,
			Version: 0xffffffff, ProducerID: -1, Batches: testBatches()}),
		"fetch": req(APIFetch, 4, &FetchRequest{Topic: []byte("orders.v2_x-1"), Offset: 1 << 40,
			MaxBytes: 1 << 20, MaxWaitMs: 500}),
		"fetch-zero":    req(APIFetch, 0xffffffff, &FetchRequest{Topic: []byte("Z")}),
		"metadata-all":  req(APIMetadata, 5, &MetadataRequest{}),
		"metadata-some": req(APIMetadata, 6, &MetadataRequest{Topics: []string{"a", "orders", longTopic}}),
		"create": req(APICreateTopic, 7, &CreateTopicRequest{Name: "orders", Partitions: 12,
			Options: TopicOptions{RetentionMs: 7 * 24 * 3600 * 1000, RetentionBytes: -1, SegmentBytes: 1 << 30}}),
		"create-max": req(APICreateTopic, 8, &CreateTopicRequest{Name: "x", Partitions: MaxPartitions,
			Options: TopicOptions{RetentionMs: -1, SegmentMs: -1}}),
		"describe": req(APIDescribeTopic, 9, &DescribeTopicRequest{Name: "orders"}),
		"list-offsets": req(APIListOffsets, 10, &ListOffsetsRequest{Topic: []byte("orders"), Partition: 2,
			Timestamp: 1_700_000_000_000}),
		"list-offsets-earliest": req(APIListOffsets, 11, &ListOffsetsRequest{Topic: []byte("o"),
			Timestamp: TimestampEarliest}),
		"fetch-multi": req(APIFetchMulti, 12, &FetchMultiRequest{Topic: []byte("orders"), MaxWaitMs: 100,
			MaxBytes: 4 << 20, Partitions: []FetchMultiPartition{{Partition: 2, Offset: 7}, {Partition: 0, Offset: 1 << 40}}}),
		"fetch-multi-one": req(APIFetchMulti, 13, &FetchMultiRequest{Topic: []byte("o"),
			Partitions: []FetchMultiPartition{{Partition: 65535}}}),
		"authenticate-first": req(APIAuthenticate, 14, &AuthenticateRequest{Mechanism: MechanismSCRAMSHA256,
			Payload: "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"}),
		"authenticate-final": req(APIAuthenticate, 15, &AuthenticateRequest{Mechanism: MechanismSCRAMSHA256,
			Payload: "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="}),
		"authenticate-empty": req(APIAuthenticate, 16, &AuthenticateRequest{}),
		"expand":             req(APIExpandTopic, 14, &ExpandTopicRequest{Name: "orders", Partitions: 16}),
		"layouts":            req(APITopicLayouts, 15, &TopicLayoutsRequest{Name: "orders"}),
	}
}

// sampleResponses returns responses covering every API, errors with and without a body,
// and fatal answers.
func sampleResponses() map[string]Response {
	resp := func(k APIKey, code Code, text string, body Body) Response {
		return Response{Header: ResponseHeader{RequestID: 42, APIKey: k, Code: code}, Text: text, Body: body}
	}
	three := NewPartitions(3, "10.0.0.1:9092")
	three[1].Addr = "10.0.0.2:9092"
	three[2].Addr = ""
	states := []PartitionState{
		{Partition: three[0], LogStartOffset: 0, NextOffset: 10, Checkpoint: -1, Session: 1},
		{Partition: three[1], LogStartOffset: 5, NextOffset: 5, Checkpoint: 4, Session: 2},
		{Partition: three[2], LogStartOffset: 1 << 40, NextOffset: 1<<40 + 9, Checkpoint: 1<<40 + 8},
	}
	return map[string]Response{
		"produce": resp(APIProduce, CodeNone, "", &ProduceResponse{Version: 2, Session: 77, Checkpoint: 99,
			BaseOffset: 100, LastOffset: 104}),
		"produce-empty": resp(APIProduce, CodeNone, "", &ProduceResponse{Version: 2, Session: 77, Checkpoint: -1,
			BaseOffset: -1, LastOffset: -1}),
		"produce-mismatch": resp(APIProduce, CodeSessionMismatch, "", &ProduceResponse{Version: 3, Session: 78,
			Checkpoint: 50, BaseOffset: -1, LastOffset: -1}),
		"produce-busy": resp(APIProduce, CodeBusy, "arena full", &ProduceResponse{Version: 2, Session: 77,
			Checkpoint: 99, BaseOffset: -1, LastOffset: -1, RetryAfterMs: 50}),
		"produce-no-body": resp(APIProduce, CodeUnknownTopic, "no topic orders", nil),
		"malformed":       resp(APIProduce, CodeMalformed, "produce body ends early", nil),
		"unknown-api":     resp(99, CodeUnknownAPI, "", nil),
		"fetch": resp(APIFetch, CodeNone, "", &FetchResponse{HighWatermark: 1003, LogStartOffset: 1000,
			Checkpoint: 1001, Records: storedBatches(1000)}),
		"fetch-empty": resp(APIFetch, CodeNone, "", &FetchResponse{Checkpoint: -1}),
		"fetch-out-of-range": resp(APIFetch, CodeOffsetOutOfRange, "", &FetchResponse{HighWatermark: 10,
			LogStartOffset: 5, Checkpoint: 9}),
		"metadata": resp(APIMetadata, CodeNone, "", &MetadataResponse{Topics: []Topic{
			{Name: "a", Version: 1, Partitions: NewPartitions(1, "h:1")},
			{Name: "orders", Version: 4, Partitions: three}}}),
		"metadata-none": resp(APIMetadata, CodeNone, "", &MetadataResponse{}),
		"create": resp(APICreateTopic, CodeNone, "", &CreateTopicResponse{Topic: Topic{Name: "orders",
			Version: 1, Partitions: NewPartitions(12, "localhost:7000")}}),
		"create-exists": resp(APICreateTopic, CodeTopicExists, "", &CreateTopicResponse{Topic: Topic{Name: "x",
			Partitions: NewPartitions(1, "")}}),
		"describe": resp(APIDescribeTopic, CodeNone, "", &DescribeTopicResponse{Name: "orders", Version: 4,
			Options:    TopicOptions{RetentionMs: -1, RetentionBytes: 1 << 30, SegmentBytes: 1 << 28, SegmentMs: 3600_000},
			Partitions: states}),
		"list-offsets": resp(APIListOffsets, CodeNone, "", &ListOffsetsResponse{Offset: 1001, HighWatermark: 1003,
			LogStartOffset: 1000}),
		"fetch-multi": resp(APIFetchMulti, CodeNone, "", &FetchMultiResponse{Parts: []FetchPart{
			{Partition: 1, HighWatermark: 1003, LogStartOffset: 1000, Checkpoint: 1001, Records: storedBatches(1000)},
			{Partition: 3, Code: CodeOffsetOutOfRange, HighWatermark: 10, LogStartOffset: 5, Checkpoint: 9},
			{Partition: 0, Code: CodeNotServing, Checkpoint: -1},
			{Partition: 2, HighWatermark: 4, Checkpoint: -1}}}),
		"fetch-multi-busy": resp(APIFetchMulti, CodeBusy, "shard queue full", nil),
		"authenticate": resp(APIAuthenticate, CodeNone, "", &AuthenticateResponse{
			Payload: "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"}),
		"authenticate-failed": resp(APIAuthenticate, CodeAuthFailed, "", nil),
		"auth-required":       resp(APIProduce, CodeAuthRequired, "", nil),
		"not-authorized":      resp(APIFetch, CodeNotAuthorized, "no consume grant on topic orders", nil),
		"expand": resp(APIExpandTopic, CodeNone, "", &ExpandTopicResponse{Topic: Topic{Name: "orders",
			Version: 2, Partitions: three}}),
		"expand-changed": resp(APIExpandTopic, CodeTopicChanged, "expanded to 8 meanwhile", nil),
		"layouts": resp(APITopicLayouts, CodeNone, "", &TopicLayoutsResponse{Name: "orders", Layouts: []Layout{
			{Version: 1, Partitions: 2}, {Version: 2, Partitions: 3, Switches: []int64{100, -1}},
			{Version: 3, Partitions: 8, Switches: []int64{-1, 0, 1 << 40}}}}),
		"layouts-one": resp(APITopicLayouts, CodeNone, "", &TopicLayoutsResponse{Name: "o", Layouts: []Layout{
			{Version: 7, Partitions: 65536}}}),
	}
}

// requireCode fails unless err is a *ProtocolError with code c.
func requireCode(t *testing.T, err error, c Code) {
	t.Helper()
	var pe *ProtocolError
	if !errors.As(err, &pe) || pe.Code != c || CodeOf(err) != c {
		t.Fatalf("error %v (%T), want code %v", err, err, c)
	}
}

// requireTyped fails unless err is ErrShort or a *ProtocolError with a known code.
func requireTyped(t *testing.T, err error) {
	t.Helper()
	var pe *ProtocolError
	if !errors.Is(err, ErrShort) && (!errors.As(err, &pe) || !pe.Code.Known() || pe.Code == CodeNone) {
		t.Fatalf("untyped error %T: %v", err, err)
	}
}

// patch32 returns a copy of b with the uint32 at off set to v.
func patch32(b []byte, off int, v uint32) []byte {
	c := append([]byte(nil), b...)
	le.PutUint32(c[off:], v)
	return c
}
