package main

import (
	"fmt"
	"testing"
	"time"
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
