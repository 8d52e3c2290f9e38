package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"sluice/engine"
	"sluice/memarena"
	"sluice/netio"
	"sluice/persist"
	"sluice/persist/vfs"
	"sluice/wire"
)

// Handle routes a request; it runs on an event loop and never blocks: it reads the
// catalog (a read lock held for map lookups only) and the partitions' windows (atomics),
// and submits everything else to the partition's shard. With authentication on, admit
// runs first (authz.go).
func (b *Broker) Handle(c *netio.Conn, slot netio.Slot, req *wire.Request) {
	hdr := wire.ResponseHeader{RequestID: req.Header.RequestID, APIKey: req.Header.APIKey}
	if b.auth != nil && !b.admit(c, slot, hdr, req) {
		return
	}
	switch body := req.Body.(type) {
	case *wire.ProduceRequest:
		b.handleProduce(c, slot, hdr, body)
	case *wire.FetchRequest:
		b.handleFetch(c, slot, hdr, body)
	case *wire.FetchMultiRequest:
		b.handleFetchMulti(c, slot, hdr, body)
	case *wire.ListOffsetsRequest:
		b.handleListOffsets(c, slot, hdr, body)
	case *wire.MetadataRequest:
		b.respond(c, slot, hdr, nil, b.metadata(body, b.visibleTopics(c)))
	case *wire.DescribeTopicRequest:
		resp, err := b.describe(body.Name)
		if err != nil {
			b.respond(c, slot, hdr, err, nil) // not resp: a nil pointer in an interface is no nil body
			return
		}
		b.respond(c, slot, hdr, nil, resp)
	case *wire.CreateTopicRequest:
		r := *body
		go func() { // creating partitions does I/O: off the loop
			defer b.recoverRequest("create_topic", nil, c, slot, hdr)
			if err := b.createTopic(&r); err != nil {
				b.respond(c, slot, hdr, err, nil)
				return
			}
			md := b.metadata(&wire.MetadataRequest{Topics: []string{r.Name}}, nil)
			b.respond(c, slot, hdr, nil, &wire.CreateTopicResponse{Topic: md.Topics[0]})
		}()
	case *wire.AuthenticateRequest: // authentication off (else admit ran it)
		b.handleAuthenticate(c, slot, hdr, body)
	case *wire.ExpandTopicRequest:
		r := *body
		go func() { // ZooKeeper round trips: off the loop
			defer b.recoverRequest("expand_topic", nil, c, slot, hdr)
			resp, err := b.expandTopic(&r)
			if err != nil {
				b.respond(c, slot, hdr, err, nil)
				return
			}
			b.respond(c, slot, hdr, nil, resp)
		}()
	case *wire.TopicLayoutsRequest:
		name := body.Name
		go func() { // ZooKeeper round trips: off the loop
			defer b.recoverRequest("topic_layouts", nil, c, slot, hdr)
			resp, err := b.topicLayouts(name)
			if err != nil {
				b.respond(c, slot, hdr, err, nil)
				return
			}
			b.respond(c, slot, hdr, nil, resp)
		}()
	default:
		b.respond(c, slot, hdr, wire.NewError(wire.CodeUnknownAPI, "no handler"), nil)
	}
}

// respond encodes and sends an answer: an error without body when err is set and body
// is nil.
func (b *Broker) respond(c *netio.Conn, slot netio.Slot, hdr wire.ResponseHeader, err error, body wire.Body) {
	r := wire.Response{Header: hdr, Body: body}
	if err != nil {
		r.Header.Code = codeOf(err)
		r.Text = wire.TextOf(err)
	}
	c.Respond(slot, netio.Response{Head: r.AppendTo(nil), File: -1})
}

// codeOf maps an error to its wire code: the one place where engine and storage errors
// become codes.
func codeOf(err error) wire.Code {
	var we *engine.WindowError
	var pe *wire.ProtocolError
	switch {
	case errors.As(err, &pe) && pe.Code != wire.CodeNone:
		return pe.Code // made by the broker: unknown topic, invalid config, internal...
	case errors.As(err, &we):
		if errors.Is(err, engine.ErrVersionMismatch) {
			return wire.CodeVersionMismatch
		}
		return wire.CodeSessionMismatch
	case errors.Is(err, memarena.ErrFull), errors.Is(err, engine.ErrSwitching):
		return wire.CodeBusy
	case errors.Is(err, memarena.ErrTooLarge):
		return wire.CodeTooLarge // not retriable: it never fits (it was not_serving, which is)
	case errors.Is(err, engine.ErrOutOfOrderSequence):
		return wire.CodeSequenceGap
	case errors.Is(err, engine.ErrInvalidBatch):
		return wire.CodeCorruptBatch
	case errors.Is(err, persist.ErrNoSpace):
		return wire.CodeNoSpace
	case errors.Is(err, persist.ErrDamaged), errors.Is(err, persist.ErrCorrupt):
		return wire.CodeCorruptData
	case errors.Is(err, persist.ErrOffsetOutOfRange):
		return wire.CodeOffsetOutOfRange
	}
	if c := wire.CodeOf(err); c != wire.CodeInternal {
		return c // the batch package's errors
	}
	return wire.CodeNotServing // a failed or closed store: the partition cannot serve now
}

// storageError gives an error from the disk its code: no_space when it says so.
func storageError(err error) error {
	if errors.Is(err, persist.ErrNoSpace) || vfs.IsNoSpace(err) {
		return wire.NewError(wire.CodeNoSpace, err.Error())
	}
	return err
}

// recoverRequest answers a request whose handling panicked with an internal error, and
// counts and logs the panic with its stack: a bug in one request's path must not take
// the broker down. Deferred by every request task; a request already answered keeps its
// answer (netio drops the second).
func (b *Broker) recoverRequest(what string, pt *part, c *netio.Conn, slot netio.Slot, hdr wire.ResponseHeader) {
	if r := recover(); r != nil {
		b.answerPanic(what, pt, r, c, slot, hdr)
	}
}

// answerPanic counts and logs the recovered panic r and answers the request with an
// internal error.
func (b *Broker) answerPanic(what string, pt *part, r any, c *netio.Conn, slot netio.Slot, hdr wire.ResponseHeader) {
	b.logPanic(what, pt, r)
	b.respond(c, slot, hdr, wire.NewError(wire.CodeInternal, fmt.Sprintf("internal error in %s: %v", what, r)), nil)
}

// recoverShard recovers a panic in the shard's own work on a partition (timers,
// checkpoints, retention), counts and logs it.
func (b *Broker) recoverShard(what string, pt *part) {
	if r := recover(); r != nil {
		b.logPanic(what, pt, r)
	}
}

func (b *Broker) logPanic(what string, pt *part, r any) {
	b.panics.Add(1)
	attrs := []any{"what", what, "panic", r, "stack", string(debug.Stack())}
	if pt != nil {
		attrs = append(attrs, "topic", pt.topic.meta.Name, "partition", pt.id)
	}
	b.cfg.Logger.Error("panic recovered: the request was answered with an internal error", attrs...)
}

// error logs err for pt at most once per logEvery, saying how many were suppressed.
func (e *everyLog) error(l *slog.Logger, msg string, pt *part, err error) {
	if ok, suppressed := e.allow(time.Now()); ok {
		l.Error(msg, "topic", pt.topic.meta.Name, "partition", pt.id, "err", err, "suppressed", suppressed)
	}
}
