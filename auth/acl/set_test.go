package acl

import "testing"

// TestAllows is the evaluation table: exact names, prefixes, implications, AnyUser,
// and deny by default.
func TestAllows(t *testing.T) {
	set := NewSet(mustParse(t, `
allow alice produce orders
allow alice consume orders.*
allow bob describe orders
allow bob create tmp.
allow carol admin *
allow dave produce,consume a*
allow dave describe ab
allow * describe public
allow * consume public.*
`))
	cases := []struct {
		user  string
		op    Op
		topic string
		want  bool
	}{
		{"alice", Produce, "orders", true},
		{"alice", Describe, "orders", true}, // produce implies describe
		{"alice", Consume, "orders", false}, // orders.* does not cover orders
		{"alice", Consume, "orders.eu", true},
		{"alice", Describe, "orders.eu", true}, // consume implies describe
		{"alice", Produce, "orders.eu", false},
		{"alice", Create, "orders", false},
		{"alice", Produce, "orders2", false},
		{"alice", Produce, "order", false},
		{"bob", Describe, "orders", true},
		{"bob", Produce, "orders", false}, // describe implies nothing
		{"bob", Create, "tmp.", true},
		{"bob", Create, "tmp.x", false}, // "tmp." is a name, not a prefix
		{"carol", Produce, "anything", true},
		{"carol", Admin, "x", true},
		{"carol", Create, "orders.eu", true},
		{"dave", Produce, "a", true}, // a prefix covers the prefix itself
		{"dave", Consume, "abc", true},
		{"dave", Describe, "ab", true},
		{"dave", Create, "ab", false},
		{"dave", Produce, "b", false},
		{"dave", Admin, "a", false},
		{"erin", Describe, "public", true}, // AnyUser's grants for a user without rules
		{"erin", Consume, "public.x", true},
		{"erin", Consume, "public", false},
		{"erin", Produce, "public.x", false},
		{"alice", Describe, "public", true}, // and for one with rules of its own
		{"alice", Consume, "public.x", true},
		{"erin", Describe, "orders", false},
		{"", Describe, "orders", false},
	}
	for _, c := range cases {
		g := set.For(c.user)
		if got := Allows(g, c.op, []byte(c.topic)); got != c.want {
			t.Errorf("%s %s %s: %v, want %v", c.user, c.op, c.topic, got, c.want)
		}
		if got := Allows(g, c.op, c.topic); got != c.want {
			t.Errorf("%s %s %s (a string): %v, want %v", c.user, c.op, c.topic, got, c.want)
		}
	}
}

// TestDenyByDefault: no rules, a nil set and a nil Grants allow nothing.
func TestDenyByDefault(t *testing.T) {
	for _, g := range []*Grants{NewSet(nil).For("alice"), (*Set)(nil).For("alice"), nil} {
		for _, o := range opNames {
			if Allows(g, o.op, []byte("orders")) {
				t.Fatalf("%s allowed without a rule", o.name)
			}
		}
	}
}

// TestAllowsAllocs: the per-request check allocates nothing.
func TestAllowsAllocs(t *testing.T) {
	g := NewSet(mustParse(t, "allow a produce x.*\nallow a consume orders\nallow a describe y.z*\n")).For("a")
	topic := []byte("orders")
	if n := testing.AllocsPerRun(100, func() {
		if !Allows(g, Consume, topic) || Allows(g, Produce, topic) || !Allows(g, Produce, []byte("x.1")) {
			t.Fatal("wrong answer")
		}
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

func mustParse(t *testing.T, text string) []Rule {
	t.Helper()
	rules, err := Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

// BenchmarkAllows measures the per-request check of a user with a few prefixes.
func BenchmarkAllows(b *testing.B) {
	rules, _ := Parse([]byte("allow a produce x.*\nallow a consume orders\nallow a describe y.z*\nallow a consume orders.eu.*\n"))
	g := NewSet(rules).For("a")
	topic := []byte("orders.eu.west")
	b.ReportAllocs()
	for b.Loop() {
		Allows(g, Consume, topic)
	}
}
