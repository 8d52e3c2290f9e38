package acl

import (
	"reflect"
	"strings"
	"testing"
)

// TestParseFormat: what Format writes, Parse reads back, comments and blanks skipped.
func TestParseFormat(t *testing.T) {
	rules := []Rule{
		{User: "alice", Ops: Produce | Consume, Topic: Pattern{Name: "orders"}},
		{User: "bob", Ops: Consume, Topic: Pattern{Name: "orders.", Prefix: true}},
		{User: AnyUser, Ops: Describe, Topic: Pattern{Prefix: true}},
		{User: "ops@example.com", Ops: Admin, Topic: Pattern{Name: "", Prefix: true}},
	}
	text := Format(rules)
	if !strings.Contains(string(text), "allow alice produce,consume orders\n") ||
		!strings.Contains(string(text), "allow bob consume orders.*\n") ||
		!strings.Contains(string(text), "allow * describe *\n") {
		t.Fatalf("format:\n%s", text)
	}
	got, err := Parse(append(text, "\n   # a comment\n\n"...))
	if err != nil || !reflect.DeepEqual(got, rules) {
		t.Fatalf("parse: %v %+v", err, got)
	}
}

// TestParseErrors: each bad line is refused with its number.
func TestParseErrors(t *testing.T) {
	for _, line := range []string{
		"deny alice produce orders",
		"allow alice produce",
		"allow alice produce orders extra",
		"allow alice write orders",
		"allow alice produce, orders",
		"allow alice produce or*ders",
		"allow alice produce orders**",
		"allow alice produce a/b",
		"allow alice produce " + strings.Repeat("x", 250),
		"allow al#ice produce orders",
	} {
		_, err := Parse([]byte("# ok\nallow x describe y\n" + line + "\n"))
		if err == nil || !strings.Contains(err.Error(), "line 3") {
			t.Errorf("%q: %v", line, err)
		}
	}
}

// TestAddRemove: grants add up per user and pattern; removing some operations keeps
// the rest, removing all drops the rule.
func TestAddRemove(t *testing.T) {
	orders, prefix := Pattern{Name: "orders"}, Pattern{Name: "orders.", Prefix: true}
	var rules []Rule
	rules = Add(rules, "alice", Produce, orders)
	rules = Add(rules, "alice", Consume, orders)
	rules = Add(rules, "alice", Consume, prefix)
	rules = Add(rules, "bob", Describe, orders)
	if len(rules) != 3 || rules[0].Ops != Produce|Consume {
		t.Fatalf("add: %+v", rules)
	}
	rules, removed := Remove(rules, "alice", Produce, orders)
	if !removed || len(rules) != 3 || rules[0].Ops != Consume {
		t.Fatalf("remove produce: %v %+v", removed, rules)
	}
	rules, removed = Remove(rules, "alice", 0, prefix)
	if !removed || len(rules) != 2 || rules[1].User != "bob" {
		t.Fatalf("remove all on the prefix: %v %+v", removed, rules)
	}
	if _, removed = Remove(rules, "carol", 0, orders); removed {
		t.Fatal("removed a rule carol never had")
	}
	if _, removed = Remove(rules, "bob", Produce, orders); removed {
		t.Fatal("removed an operation bob was never granted")
	}
}

// TestOps: names parse and print back.
func TestOps(t *testing.T) {
	ops, err := ParseOps("consume, produce,admin")
	if err != nil || ops != Produce|Consume|Admin || ops.String() != "produce,consume,admin" {
		t.Fatalf("%v %v", ops, err)
	}
	for _, bad := range []string{"", "read", "produce,", "PRODUCE"} {
		if _, err := ParseOps(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzParse: any file is parsed or refused, never a panic, and what parses formats to
// text that parses to the same rules.
func FuzzParse(f *testing.F) {
	f.Add([]byte("allow alice produce,consume orders\nallow * describe *\n# c\n"))
	f.Add([]byte("allow bob admin a.*\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rules, err := Parse(data)
		if err != nil {
			return
		}
		again, err := Parse(Format(rules))
		if err != nil || len(again) != len(rules) {
			t.Fatalf("formatted rules do not parse back: %v", err)
		}
		for i := range rules {
			if rules[i] != again[i] {
				t.Fatalf("rule %d: %+v, then %+v", i, rules[i], again[i])
			}
		}
		Allows(NewSet(rules).For("alice"), Produce, []byte("orders"))
	})
}
