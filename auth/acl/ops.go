// Package acl is sluice's authorization: grants of operations on topics to users, their
// evaluation, and the text format of the file that holds them.
//
// A grant gives a user some operations (produce, consume, create, describe, admin) on a
// topic name or on every topic whose name starts with a prefix. Nothing is allowed that
// no grant allows (deny by default). produce, consume and create imply describe (a
// producer must read the topic's metadata); admin implies every operation.
//
// File format (one grant a line; blank lines and lines starting with # are ignored):
//
//	allow USER OPS TOPIC
//	allow alice produce,consume orders      the topic "orders" only
//	allow bob consume orders.*              every topic whose name starts with "orders."
//	allow ops admin *                       every topic: a super-user
//	allow * describe *                      every authenticated user may list every topic
//
// USER is a user name or * (every authenticated user); OPS a comma-separated list; TOPIC
// a topic name, or a prefix followed by * (topic names never hold *).
//
// Concurrency: a Set and the Grants it returns are immutable once built and safe for
// concurrent use; Allows allocates nothing. Rules, Parse and the edit functions are plain
// values and functions.
package acl

import (
	"fmt"
	"strings"
)

// Op is a set of operations, a bit each.
type Op uint8

// The operations.
const (
	Produce  Op = 1 << iota // produce requests
	Consume                 // fetch, fetch_multi, list_offsets
	Create                  // create_topic
	Describe                // metadata, describe_topic
	Admin                   // every operation
)

// allOps is every operation.
const allOps = Produce | Consume | Create | Describe | Admin

var opNames = [...]struct {
	op   Op
	name string
}{{Produce, "produce"}, {Consume, "consume"}, {Create, "create"}, {Describe, "describe"}, {Admin, "admin"}}

// ParseOps parses a comma-separated list of operation names ("produce,consume").
func ParseOps(s string) (Op, error) {
	var ops Op
	for _, name := range strings.Split(s, ",") {
		op, ok := opNamed(strings.TrimSpace(name))
		if !ok {
			return 0, fmt.Errorf("unknown operation %q (want produce, consume, create, describe or admin)", name)
		}
		ops |= op
	}
	return ops, nil
}

func opNamed(name string) (Op, bool) {
	for _, o := range opNames {
		if o.name == name {
			return o.op, true
		}
	}
	return 0, false
}

// String returns the comma-separated names of the operations in o ("" for none).
func (o Op) String() string {
	var names []string
	for _, n := range opNames {
		if o&n.op != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, ",")
}

// implied returns o with what its operations imply: admin every operation, produce,
// consume and create describe.
func (o Op) implied() Op {
	if o&Admin != 0 {
		return allOps
	}
	if o&(Produce|Consume|Create) != 0 {
		o |= Describe
	}
	return o
}
