// Package client is the Go client of sluice: a producer with Swift's write window made
// exactly-once, a consumer, and the admin calls. It speaks the wire protocol of
// docs/protocol.md and uses only the wire, batch and codec packages (never the broker's).
//
// # Producer
//
// NewProducer connects to a topic. Produce copies a record into the client-side batch of
// its physical partition and returns (async, the default); ProduceBatch does the same for
// several records under one lock; ProduceSync also waits until the broker accepted the
// record, or until it is persisted. Records are routed by the hash
// of their key (LogicalOf) to one of the 65536 logical partitions, or by an explicit
// logical id, then to the physical partition serving that id (wire.PartitionOf); keyless
// records stick to one partition until its batch closes, then move to the next, round
// robin (route.go says why). Batches are sealed when they reach BatchBytes or have
// lingered for Linger since their first record, or since the producer's last request
// before they began when that is sooner (a record into an idle producer goes at once;
// LowLatency: as soon as the sender is free), compressed with the chosen codec, and kept
// until the broker's checkpoint C covers them (DESIGN.md §2):
//
//	q: [ accepted (offsets known) | in flight | not sent ] + open batch
//	   ^ dropped from here once C covers them
//
// Every batch carries the producer id and per-partition sequences, so a resend (after a
// lost connection, a busy answer or a session change) is answered with the original
// offsets instead of being appended again. On a session change the window forgets the
// offsets it learned in the old session and resends every batch it still holds, in
// order, with the same boundaries and sequences. Memory is bounded by MaxBufferedBytes:
// Produce blocks (until its context ends) or fails with ErrBufferFull. Progress numbers
// given with records map to Checkpoint(); Close reports the records that were not
// persisted. Retriable refusals (busy; no_space, the broker's disk is full; not_serving)
// are retried with a backoff that doubles up to RetryBackoff's maximum; a call that gives
// up at its context's end says why (errors.Is(err, ErrBrokerNoSpace) for a full disk).
//
// A topic expansion (Admin.ExpandTopic, docs/cluster.md) does not stop a producer: it
// pauses Produce while its windows drain (the records routed by the old layout are found
// in their old partition or routed again by the new one, ahead of every later record),
// then goes on with more partitions (window_drain.go, producer_expand.go).
//
// # Consumer
//
// NewConsumer reads a topic (or the physical partitions serving a logical range) from the
// oldest or newest offset, an offset, or a time, and any partition from its own offset
// (StartPositions: an application that keeps the positions it reached, Positions, resumes
// from them; the topic keeps no consumer positions). Per broker, two fetcher goroutines
// (lanes, each with its own connection and half of that broker's partitions) each keep
// one fetch_multi request (one long poll, one byte budget of FetchMaxBytes) in flight and
// send the next as soon as an answer arrives; Poll takes the next answer from any
// fetcher, and Next and Record iterate its records without allocating per record. A
// quiet partition never holds up a busy one: the broker answers as soon as any partition
// of the request has records. Memory: two answers per fetcher. Offsets are checked dense end
// to end: the first batch of every fetch answer holds the offset asked for, and each
// later batch starts right after the one before. A batch's base offset is outside its
// CRC, so this is what catches a damaged one; the consumer then stops with a *GapError
// (ErrOffsetGap) and never delivers a record past it. A batch whose CRC does not match, or
// whose records do not decode (a broker trusting its producers, broker.trust_records,
// stored it), stops it with a *BatchError; when the CRC matched and the batches beside
// it confirm its offsets, its Next says where the batch ends, and a consumer started
// there (StartPositions) reads on without its records. Across topic expansions the consumer delivers each logical id's records of an older layout before those of a newer
// one, holding a partition until the partitions its ids came from are read up to their
// switch offsets (layout.go, consumer_layout.go), and it finds the new partitions.
//
// # Security
//
// TLS(conf) makes every connection TLS; Auth(user, password) makes every connection
// authenticate first (SCRAM-SHA-256: the password never leaves the client, and the
// broker must prove it holds the user's credentials). Both apply where connections are
// made (conn.go dial): the admin's, a producer's two per broker, a consumer's lanes, and
// every reconnection. The broker's refusals match ErrAuthFailed, ErrAuthRequired and
// ErrNotAuthorized, and TLS settings that do not fit the broker's (TLS to a plaintext
// port, a refused certificate either way) match ErrTLSMismatch, or the tls_required code
// for plaintext to a TLS port; none is retried.
//
// # Key hashing
//
// LogicalOf(key) is the top 16 bits of fmix64(FNV-1a 64(key)), murmur3's finalizer over
// the 64-bit FNV-1a hash (docs/protocol.md §8): physical partitions take the high bits of
// the logical id, so every key byte must reach them. It is part of the protocol between
// clients: every client must route a key the same way.
//
// # Concurrency
//
// Producer, Consumer and Admin methods are safe from any goroutine, except that a
// Consumer's Poll, Next and Record are used by one goroutine at a time.
//
// Inside the producer, the per-partition window (window.go) is a synchronous state machine
// with no goroutines, sockets or clocks; the driver owns them: per broker a sender
// goroutine and a reader goroutine per connection; inside the consumer, a fetcher
// goroutine per lane of a broker (fetcher.go), which owns its fetch positions and hands answers
// over a channel. Producer.mu guards the windows; a
// link's and a connection's locks guard their own fields. No two of these locks are ever
// held at once, so there is no lock order to keep. Files: config.go (options), window.go
// and window_answer.go (the state machine), window_drain.go and producer_expand.go
// (expansions), producer.go and producer_close.go (API), sender.go and pconn.go (the
// driver), conn.go (framing, synchronous connections), consumer.go, fetcher.go, iter.go,
// start.go, layout.go and consumer_layout.go (consumer), admin.go, admin_expand.go,
// route.go, auth.go (the authentication exchange).
package client
