package broker

import (
	"sluice/auth/acl"
	"sluice/netio"
	"sluice/wire"
)

// admit decides, on the loop, whether a request may run with authentication on: an
// authenticate request runs its exchange step (admit answers it and returns false); any
// other needs an authenticated connection (else auth_required, which also ends an
// exchange under way) and a grant of the request's operation on its topic (else
// not_authorized). What it costs a request: an atomic load, a pointer comparison, and
// the grant check (a map lookup and the user's prefixes; no lock, no allocation).
func (b *Broker) admit(c *netio.Conn, slot netio.Slot, hdr wire.ResponseHeader, req *wire.Request) bool {
	if r, ok := req.Body.(*wire.AuthenticateRequest); ok {
		b.handleAuthenticate(c, slot, hdr, r)
		return false
	}
	s := sessionOf(c)
	s.exch = nil
	g, ok := s.current(b.auth.snap.Load())
	if !ok {
		b.auth.required.Add(1)
		b.respond(c, slot, hdr, errAuthRequired, nil)
		return false
	}
	if err := authorize(g, req.Body); err != nil {
		b.auth.denied.Add(1)
		b.respond(c, slot, hdr, err, nil)
		return false
	}
	return true
}

// authorize returns nil when g grants what body asks, else a not_authorized error
// naming the operation and the topic (the user knows both: nothing leaks).
func authorize(g *acl.Grants, body wire.Body) error {
	switch r := body.(type) {
	case *wire.ProduceRequest:
		return check(g, acl.Produce, r.Topic)
	case *wire.FetchRequest:
		return check(g, acl.Consume, r.Topic)
	case *wire.FetchMultiRequest:
		return check(g, acl.Consume, r.Topic)
	case *wire.ListOffsetsRequest:
		return check(g, acl.Consume, r.Topic)
	case *wire.CreateTopicRequest:
		return check(g, acl.Create, r.Name)
	case *wire.DescribeTopicRequest:
		return check(g, acl.Describe, r.Name)
	case *wire.ExpandTopicRequest: // changes the topic for every producer and consumer
		return check(g, acl.Admin, r.Name)
	case *wire.TopicLayoutsRequest: // consumers read them to keep each key's order
		return check(g, acl.Describe, r.Name)
	case *wire.MetadataRequest:
		for _, name := range r.Topics { // every topic (none named) is filtered instead
			if err := check(g, acl.Describe, name); err != nil {
				return err
			}
		}
		return nil
	}
	// An API without a rule here is refused: a new API must say what it needs.
	return wire.NewError(wire.CodeNotAuthorized, "no authorization rule for "+body.Key().String())
}

func check[T ~string | ~[]byte](g *acl.Grants, op acl.Op, topic T) error {
	if acl.Allows(g, op, topic) {
		return nil
	}
	return wire.NewError(wire.CodeNotAuthorized, "no "+op.String()+" grant on topic "+string(topic))
}

// visibleTopics returns the filter of a metadata answer for every topic: nil (all of
// them) without authentication, else the topics the connection's user may describe. Call
// it after admit, on the loop.
func (b *Broker) visibleTopics(c *netio.Conn) func(name string) bool {
	if b.auth == nil {
		return nil
	}
	g := sessionOf(c).grants
	return func(name string) bool { return acl.Allows(g, acl.Describe, name) }
}
