package check

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// hist builds a history by hand: sends as (producer, seq, ack), reads as (partition,
// offset, producer, seq, durable).
type hist struct{ h *History }

func newHist() hist { return hist{NewHistory()} }

func (h hist) send(p, s uint64, a Ack) hist { h.h.Sent(ID{p, s}, a); return h }

func (h hist) read(part int, off int64, p, s uint64, durable bool) hist {
	h.h.Read(Read{Partition: part, Offset: off, ID: ID{p, s}, Valid: true, Durable: durable})
	return h
}

// clean is a history with two producers on two partitions, every record read once at
// or below C by a live consumer and again by the final read.
func clean() hist {
	h := newHist()
	for s := uint64(0); s < 4; s++ {
		h.send(1, s, AckPersisted).send(2, s, AckAccepted)
		h.read(0, int64(s), 1, s, true).read(1, int64(s), 2, s, true)
		h.read(0, int64(s), 1, s, true).read(1, int64(s), 2, s, true)
	}
	return h
}

// want checks that the report counts exactly the given anomalies (every other count
// 0) and that its verdict matches whether one of them is forbidden.
func want(t *testing.T, r *Report, counts map[string]int) {
	t.Helper()
	ok := true
	for _, a := range append(append([]string{}, Forbidden...), Allowed...) {
		if r.Counts[a] != counts[a] {
			t.Errorf("%s: %d, want %d (examples %q)", a, r.Counts[a], counts[a], r.Examples[a])
		}
	}
	for _, f := range Forbidden {
		if counts[f] > 0 {
			ok = false
		}
	}
	if r.OK != ok {
		t.Errorf("verdict OK=%v, want %v", r.OK, ok)
	}
}

func TestCleanHistories(t *testing.T) {
	want(t, Check(clean().h), nil)
	// Reads above C of records later read at the same offset at or below C are fine.
	want(t, Check(clean().read(0, 1, 1, 1, false).h), nil)
	// An empty history is clean.
	want(t, Check(NewHistory()), nil)
	// A record sent as failed and never read, and an accepted one that was read: clean.
	want(t, Check(clean().send(3, 0, AckFailed).send(3, 1, AckAccepted).read(2, 0, 3, 1, true).h), nil)
	// Sequences may skip (a failed record between) but not go back.
	want(t, Check(newHist().send(1, 0, AckPersisted).send(1, 5, AckPersisted).
		read(0, 0, 1, 0, true).read(0, 1, 1, 5, true).h), nil)
}

func TestEachAnomalyIsFound(t *testing.T) {
	cases := []struct {
		name   string
		h      hist
		counts map[string]int
	}{
		{"lost", clean().send(1, 9, AckPersisted), map[string]int{Lost: 1}},
		{"lost although read above C", clean().send(1, 9, AckPersisted).read(0, 9, 1, 9, false), map[string]int{Lost: 1}},
		{"lost-accepted", clean().send(2, 9, AckAccepted), map[string]int{LostAccepted: 1}},
		{"damaged", func() hist { h := clean().send(1, 9, AckPersisted); h.h.Damaged(ID{1, 9}); return h }(),
			map[string]int{Damaged: 1}},
		{"damaged, acknowledged accepted", func() hist { h := clean().send(2, 9, AckAccepted); h.h.Damaged(ID{2, 9}); return h }(),
			map[string]int{Damaged: 1}},
		{"unacknowledged, read or not", clean().send(4, 0, AckUnknown).send(4, 1, AckUnknown).read(3, 0, 4, 0, true),
			map[string]int{Unacknowledged: 2}},
		{"duplicated in one partition", clean().read(0, 4, 1, 3, true), map[string]int{Duplicated: 1}},
		{"duplicated across partitions", clean().read(5, 0, 1, 3, true), map[string]int{Duplicated: 1}},
		{"reordered", newHist().send(1, 0, AckPersisted).send(1, 1, AckPersisted).
			read(0, 0, 1, 1, true).read(0, 1, 1, 0, true), map[string]int{Reordered: 1}},
		{"inconsistent offset", clean().read(0, 2, 2, 3, true), map[string]int{Inconsistent: 1}},
		{"rewritten above C", clean().send(2, 7, AckUnknown).read(0, 2, 2, 7, false), map[string]int{Rewritten: 1, Unacknowledged: 1}},
		{"never sent", clean().read(0, 4, 9, 9, true), map[string]int{Unexpected: 1}},
		{"sent as failed, read", clean().send(3, 0, AckFailed).read(2, 0, 3, 0, true), map[string]int{Unexpected: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { want(t, Check(c.h.h), c.counts) })
	}
}

// TestBadChecksumIsUnexpected goes through the value encoding: a flipped bit in a value
// read is unexpected, even when its identity is one that was sent.
func TestBadChecksumIsUnexpected(t *testing.T) {
	h := clean()
	v := AppendValue(nil, ID{1, 0}, 64)
	v[40] ^= 4
	h.h.Read(ReadOf(0, 0, v, true))
	want(t, Check(h.h), map[string]int{Unexpected: 1})
}

func TestAckOnlyGetsStronger(t *testing.T) {
	h := newHist().send(1, 0, AckPersisted).send(1, 0, AckAccepted).send(1, 0, AckFailed).send(1, 0, AckUnknown)
	want(t, Check(h.h), map[string]int{Lost: 1})
}

func TestReportOutputs(t *testing.T) {
	r := Check(clean().send(1, 9, AckPersisted).h)
	var table, js bytes.Buffer
	if err := r.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "lost             forbidden           1") || !strings.Contains(table.String(), "FAIL") {
		t.Fatalf("table:\n%s", table.String())
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.OK || back.Counts[Lost] != 1 || back.Sent != 9 || back.Acks["persisted"] != 5 {
		t.Fatalf("JSON round trip: %+v", back)
	}
}

// TestCutSupersedesEarlierReads: after an injected fault cut partition 0 at offset 2,
// new records take offsets 2 and 3; reads of the old ones there, even at or below C,
// are neither inconsistent nor lost, while the same history without the cut is both.
func TestCutSupersedesEarlierReads(t *testing.T) {
	build := func(withCut bool) *History {
		h := newHist()
		for s := uint64(0); s < 4; s++ {
			h.send(1, s, AckPersisted).read(0, int64(s), 1, s, true)
		}
		if withCut {
			h.h.Cut(0, 2)
			h.h.Damaged(ID{1, 2})
			h.h.Damaged(ID{1, 3})
		}
		h.send(2, 0, AckPersisted).send(2, 1, AckPersisted)
		h.read(0, 0, 1, 0, true).read(0, 1, 1, 1, true).read(0, 2, 2, 0, true).read(0, 3, 2, 1, true)
		return h.h
	}
	want(t, Check(build(true)), map[string]int{Damaged: 2, Rewritten: 2})
	want(t, Check(build(false)), map[string]int{Inconsistent: 2, Lost: 2})
}

// TestLostNamesItsPlace: a lost record whose producer's answer gave its place is
// reported with that place and what was read there instead.
func TestLostNamesItsPlace(t *testing.T) {
	h := NewHistory()
	lost, other := ID{Producer: 1, Seq: 7}, ID{Producer: 2, Seq: 3}
	h.Sent(lost, AckPersisted)
	h.Placed(lost, 2, 40)
	h.Sent(other, AckPersisted)
	h.Read(Read{Partition: 2, Offset: 40, ID: other, Valid: true, Durable: true})
	r := Check(h)
	if r.Counts[Lost] != 1 {
		t.Fatalf("lost %d, want 1", r.Counts[Lost])
	}
	if got := r.Examples[Lost][0]; !strings.Contains(got, "partition 2 offset 40, which holds") {
		t.Fatalf("the lost record's line does not name its place: %q", got)
	}
}
