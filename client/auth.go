package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"sluice/auth/scram"
	"sluice/wire"
)

// Auth makes every connection authenticate as user with password (SCRAM-SHA-256, the
// authenticate API) before anything else is sent on it: the admin's, each producer
// link's two, each consumer lane's, and every reconnection. The password stays in the
// client's memory; the broker never receives it, and proves it holds the user's
// credentials (a broker that cannot is refused). Without this option nothing is sent.
func Auth(user, password string) Opt {
	return optFunc(func(c *cfg) { c.user, c.password = user, password })
}

// maxAuthFrame bounds an authenticate answer: SCRAM messages are a few hundred bytes.
const maxAuthFrame = 64 << 10

// authenticate runs the exchange on a connection just made, within the dial timeout
// (and ctx). It leaves nothing buffered: each answer is read exactly.
func authenticate(ctx context.Context, c *cfg, nc net.Conn, addr string) error {
	sc, err := scram.NewClient(c.user, c.password)
	if err != nil {
		return fmt.Errorf("cannot authenticate to %s: %w", addr, err)
	}
	deadline := time.Now().Add(c.dialTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	nc.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer func() {
		stop()
		nc.SetDeadline(time.Time{})
	}()
	fail := func(err error) error {
		return fmt.Errorf("cannot authenticate to %s as %s: %w", addr, c.user, ctxErr(ctx, err))
	}
	first, err := authStep(nc, 1, sc.First())
	if err != nil {
		return fail(err)
	}
	final, err := sc.Final(first)
	if err != nil {
		return fail(err)
	}
	last, err := authStep(nc, 2, final)
	if err != nil {
		return fail(err)
	}
	if err := sc.Verify(last); err != nil {
		return fail(err)
	}
	return nil
}

// authStep sends one authenticate request with id and returns the answer's payload, or
// the broker's error.
func authStep(nc net.Conn, id uint32, msg string) (string, error) {
	req := wire.Request{Header: wire.RequestHeader{APIKey: wire.APIAuthenticate, RequestID: id},
		Body: &wire.AuthenticateRequest{Mechanism: wire.MechanismSCRAMSHA256, Payload: msg}}
	if _, err := nc.Write(req.AppendTo(nil)); err != nil {
		return "", fmt.Errorf("cannot send authenticate request: %w", err)
	}
	frame := make([]byte, wire.ResponseHeaderSize)    // every answer is longer: it has a text
	if _, err := io.ReadFull(nc, frame); err != nil { // the first read: TLS 1.3 refusals show here
		return "", fmt.Errorf("cannot read authenticate answer: %w", tlsRefusal(err))
	}
	size, _, err := wire.PeekResponse(frame, maxAuthFrame)
	if err != nil {
		return "", fmt.Errorf("cannot read authenticate answer: %w", err)
	}
	frame = append(frame, make([]byte, size-len(frame))...)
	if _, err := io.ReadFull(nc, frame[wire.ResponseHeaderSize:]); err != nil {
		return "", fmt.Errorf("cannot read authenticate answer: %w", err)
	}
	var resp wire.Response
	if _, err := resp.Decode(frame, maxAuthFrame); err != nil {
		return "", fmt.Errorf("cannot decode authenticate answer: %w", err)
	}
	if resp.Header.RequestID != id || resp.Header.APIKey != wire.APIAuthenticate {
		return "", fmt.Errorf("cannot match authenticate answer: id %d of %v, want %d", resp.Header.RequestID, resp.Header.APIKey, id)
	}
	if err := resp.Err(); err != nil {
		return "", err
	}
	return resp.Body.(*wire.AuthenticateResponse).Payload, nil
}

// permanent reports whether err is one no retry cures: the broker refused the
// credentials or a grant, or the TLS settings do not fit the broker's. The producer's
// links, the consumer and the admin calls give up on it instead of reconnecting.
func permanent(err error) bool {
	return errors.Is(err, wire.ErrAuthFailed) || errors.Is(err, wire.ErrAuthRequired) ||
		errors.Is(err, wire.ErrNotAuthorized) || errors.Is(err, ErrTLSMismatch) || IsCode(err, wire.CodeTLSRequired)
}
