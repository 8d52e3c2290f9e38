// Package wire is the broker's wire protocol: frames, request and response bodies, API
// keys and error codes. The broker's network layer and the Go client both use it.
// docs/protocol.md is the reference, byte by byte; this comment is a summary of it.
//
// Every integer is little-endian and fixed-width, as in the batch format. A string is a
// uint16 length and that many bytes; a list is a uint32 count and its elements. Every
// frame starts with a uint32 length: the number of bytes after that field.
//
//	request frame                         response frame
//	 0 +---------------------+             0 +---------------------+
//	   | length       uint32 |               | length       uint32 |
//	 4 +---------------------+             4 +---------------------+
//	   | API key      uint16 |               | request id   uint32 |
//	 6 +---------------------+             8 +---------------------+
//	   | API version  uint16 |               | API key      uint16 |
//	 8 +---------------------+            10 +---------------------+
//	   | request id   uint32 |               | error code   uint16 |
//	12 +---------------------+            12 +---------------------+
//	   | body ...            |               | error text  string |  empty on success
//	   +---------------------+               +---------------------+
//	                                         | body ...            |  absent if fatal
//	                                         +---------------------+
//
// The API keys and error codes, with their numbers, names and properties, are defined in
// one table file, codes.go. Each API has a file with its request and response bodies:
// produce.go, fetch.go, fetchmulti.go, metadata.go, topic.go (create and describe),
// offsets.go (list_offsets), auth.go (authenticate). Bodies are Body
// values: AppendTo(dst) appends, Decode(b) decodes from the front of b and returns the
// rest. []byte fields (topic names of produce and fetch requests, batches, records) alias
// the decoded input; string fields are copies. Nothing is allocated per record: batches
// are carried as opaque bytes.
//
// Two layouts serve copying a payload at most once:
//
//   - A produce request puts its batches last, after every variable field, with their
//     exact length just before them. A broker peeks the frame header (PeekFrame),
//     decodes the produce header from a prefix of the frame (ProduceRequest.
//     DecodeFrameHeader, which says how many bytes it needs when the prefix is short),
//     and copies the batches once, straight into its own memory.
//   - A fetch response puts every fixed field and the exact length of its records before
//     the records, so the broker encodes everything up to the records
//     (FetchResponse.AppendFrameHeader) before the records are in user space, then sends
//     them with sendfile or writev.
//
// Errors: ErrShort means "need more bytes" and is not an error to answer. Everything else
// a decoder refuses is a *ProtocolError whose Code the broker answers. The codes for
// frames it cannot decode (malformed, frame_too_large, unknown_api, unsupported_version)
// are fatal: the broker closes the connection after answering. A well-formed request
// with a bad value (invalid_topic, invalid_config) is not. The frame size limit is
// checked from the length field, before anything is allocated for the frame.
//
// Concurrency: none is provided. Decoding only reads its input, so several goroutines may
// decode the same bytes; a decoded message aliases them and is used by one goroutine at a
// time, like everything else here.
package wire
