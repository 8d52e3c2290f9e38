package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"sluice/client"
	"sluice/internal/testbroker"
	"sluice/wire"
)

// TestExitStatusConsistent: every subcommand exits 1 for a failure at run time (here an
// unknown topic: produce exited 2 and describe 1) and 2 for a usage error, and a broker's
// error is printed with its code once (it was "wire: unknown_topic: wire: unknown_topic:
// ..."). The millisecond options' largest value goes through, and one more, sent without
// the command's check, is refused by the broker as invalid_config instead of overflowing.
func TestExitStatusConsistent(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	for _, args := range [][]string{
		{"produce", "--topic", "nosuch", "--broker", b.Addr},
		{"consume", "--topic", "nosuch", "--broker", b.Addr},
		{"topic", "describe", "nosuch", "--broker", b.Addr},
	} {
		code, _, errOut := sluiceCmd(t, "a\n", args...)
		if code != 1 || strings.Count(errOut, "unknown_topic") != 1 || strings.Contains(errOut, "usage:") {
			t.Fatalf("sluice %s: exit %d, want 1 with unknown_topic once\n%s", strings.Join(args, " "), code, errOut)
		}
	}
	for _, args := range [][]string{
		{"produce", "--broker", b.Addr},
		{"consume", "--topic", "t", "--max", "-1", "--broker", b.Addr},
		{"topic", "create", "--broker", b.Addr},
		{"topic", "describe", "a", "b", "--broker", b.Addr},
		{"topic", "expand", "t", "--partitions", "1", "--broker", b.Addr},
		{"topic", "expand", "t", "--partitions", "65537", "--broker", b.Addr},
		{"segment", "dump"},
		{"broker"},
		{"bench", "produce", "--from", "middle"},
	} {
		if code, _, errOut := sluiceCmd(t, "", args...); code != 2 || !strings.Contains(errOut, "usage: sluice") {
			t.Fatalf("sluice %s: exit %d, want 2 with the usage\n%s", strings.Join(args, " "), code, errOut)
		}
	}
	// An embedded broker does not expand topics: a clear refusal, exit 1.
	mustRun(t, 0, "", "topic", "create", "small", "--partitions", "2", "--broker", b.Addr)
	if code, _, errOut := sluiceCmd(t, "", "topic", "expand", "small", "--partitions", "4", "--broker", b.Addr); code != 1 ||
		!strings.Contains(errOut, "invalid_config") || !strings.Contains(errOut, "distributed mode") {
		t.Fatalf("expand on an embedded broker: exit %d\n%s", code, errOut)
	}
	maxMs := "9223372036854"
	mustRun(t, 0, "", "topic", "create", "forever", "--broker", b.Addr, "--segment-ms", maxMs, "--retention-ms", maxMs)
	if out := mustRun(t, 0, "", "topic", "describe", "forever", "--broker", b.Addr); !strings.Contains(out, "retention-ms="+maxMs) ||
		!strings.Contains(out, "segment-ms="+maxMs) {
		t.Fatalf("describe:\n%s", out)
	}
	a, err := client.NewAdmin(client.Brokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = a.CreateTopic(ctx, "overflow", 1, wire.TopicOptions{SegmentMs: wire.MaxTopicMs + 1})
	if !client.IsCode(err, wire.CodeInvalidConfig) {
		t.Fatalf("segment ms over the bound: %v, want invalid_config", err)
	}
}

// TestConsumeTimeout: consume gives up on a broker that does not answer after --timeout
// (it waited forever), exits 1 and says which broker and how long.
func TestConsumeTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: every connection is refused
	code, _, errOut := sluiceCmd(t, "", "consume", "--topic", "t", "--broker", addr, "--timeout", "500ms")
	// The cause is the failed connection: refused, or, when the host is so loaded that
	// the last attempt outlived the deadline, timed out (seen under the full suite).
	if code != 1 || !strings.Contains(errOut, "no answer from broker "+addr+" within --timeout 500ms") ||
		!strings.Contains(errOut, "cannot connect to "+addr) {
		t.Fatalf("consume from a broker that is not there: exit %d\n%s", code, errOut)
	}
}
