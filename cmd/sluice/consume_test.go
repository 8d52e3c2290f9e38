package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sluice/batch"
	"sluice/client"
	"sluice/internal/testbroker"
)

func TestParseFrom(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		s, err := parseFrom(in)
		if got := fmt.Sprintf("%+v %v", s, err != nil); got != want {
			t.Fatalf("parseFrom(%q) = %s, want %s", in, got, want)
		}
	}
	f("oldest", "{kind:0 offset:0 millis:0} false")
	f("newest", "{kind:1 offset:0 millis:0} false")
	f("42", "{kind:2 offset:42 millis:0} false")
	f("2026-01-02T03:04:05Z", fmt.Sprintf("{kind:3 offset:0 millis:%d} false",
		time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixMilli()))
	f("-1", "{kind:0 offset:0 millis:0} true")
	f("yesterday", "{kind:0 offset:0 millis:0} true")
}

func TestParseLogicalRange(t *testing.T) {
	f := func(in string, lo, hi uint16, bad bool) {
		t.Helper()
		l, h, err := parseLogicalRange(in)
		if l != lo || h != hi || (err != nil) != bad {
			t.Fatalf("parseLogicalRange(%q) = %d, %d, %v", in, l, h, err)
		}
	}
	f("0-65535", 0, 65535, false)
	f("7-7", 7, 7, false)
	f("9-8", 0, 0, true)
	f("0-65536", 0, 0, true)
	f("12", 0, 0, true)
}

func TestParsePositions(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		pos, err := parsePositions(in)
		if got := fmt.Sprint(pos, err != nil); got != want {
			t.Fatalf("parsePositions(%q) = %s, want %s", in, got, want)
		}
	}
	f("0=12", "map[0:12] false")
	f("3=0,1=99", "map[1:99 3:0] false")
	f("", "map[] true")
	f("0=1,0=2", "map[] true")
	f("0=-1", "map[] true")
	f("-1=5", "map[] true")
	f("0:5", "map[] true")
	f("0=5,", "map[] true")
}

// TestConsumePositions: --positions starts the partition it names at its offset; an
// offset past the partition's end starts at its end (as the flag's help says).
func TestConsumePositions(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	mustRun(t, 0, "", "topic", "create", "t", "--broker", b.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := client.NewProducer(ctx, "t", client.Brokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if err := p.Produce(ctx, &client.Record{Value: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := sluiceCmd(t, "", "consume", "--broker", b.Addr, "--topic", "t", "--positions", "0=150", "--idle", "1s")
	lines := strings.Fields(out)
	if code != 0 || len(lines) != 50 || lines[0] != "150" || lines[49] != "199" {
		t.Fatalf("consume --positions 0=150: exit %d, %d lines (%.20q...)\n%s", code, len(lines), out, errOut)
	}
	if code, out, errOut := sluiceCmd(t, "", "consume", "--broker", b.Addr, "--topic", "t", "--positions", "0=500", "--idle", "1s"); code != 0 || out != "" {
		t.Fatalf("consume --positions 0=500 (past the end, 200): exit %d\nstdout: %.40q\nstderr: %s", code, out, errOut)
	}
}

// TestConsumeStopsAtGap is the report's reproduction: 40 batches of 200 lines ("1" to
// "200") in 64 KiB segments, a restart, then the base offset of the third batch of the
// first (sealed) segment raised by 1000 on disk. consume from the oldest offset printed
// 7000 of the 8000 lines and exited 0; it must print the lines before the damaged batch
// (400, unless the client closed a batch early), name the gap and exit 1. The batches are produced through the client (as 40
// `sluice produce` runs would, one batch each, but faster). The file is edited after the
// restart, with the broker running, as in the report: a broker that loads a partition
// checks the headers of its last 64 MiB and refuses damage there, which is no test of
// the consumer.
func TestConsumeStopsAtGap(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	mustRun(t, 0, "", "topic", "create", "t", "--segment-bytes", "65536", "--broker", b.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := client.NewProducer(ctx, "t", client.Brokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	for range 40 {
		for i := 1; i <= 200; i++ {
			if err := p.Produce(ctx, &client.Record{Value: []byte(fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.WaitPersisted(ctx); err != nil { // seals the batch
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	b.Restart()
	seg := filepath.Join(b.Dir, "t", "0", "00000000000000000000.log")
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	// The first batch at or past offset 400 (the client's batches usually hold the 200
	// lines of one round, but a sender may close a batch early: find it by its header).
	pos := 0
	var victim batch.Header
	for {
		h, err := batch.ParseHeader(data[pos:])
		if err != nil {
			t.Fatalf("batch at %d of %s: %v", pos, seg, err)
		}
		if h.BaseOffset >= 400 {
			victim = h
			break
		}
		pos += h.Size()
	}
	batch.SetBaseOffset(data[pos:], victim.BaseOffset+1000)
	if err := os.WriteFile(seg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := sluiceCmd(t, "", "consume", "--broker", b.Addr, "--topic", "t", "--from", "oldest", "--idle", "2s")
	want := fmt.Sprintf("offset gap in t/0: expected offset %d", victim.BaseOffset)
	if code != 1 || int64(strings.Count(out, "\n")) != victim.BaseOffset || !strings.Contains(errOut, want) {
		t.Fatalf("consume past a damaged batch: exit %d, %d lines\n%s", code, strings.Count(out, "\n"), errOut)
	}
}
