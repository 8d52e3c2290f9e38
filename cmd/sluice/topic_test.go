package main

import (
	"flag"
	"fmt"
	"testing"
)

func TestParseInterspersed(t *testing.T) {
	f := func(args []string, want string) {
		t.Helper()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		n := fs.Int("n", 0, "")
		pos, err := parseInterspersed(fs, args)
		if got := fmt.Sprintf("%q %d %v", pos, *n, err != nil); got != want {
			t.Fatalf("%q: %s, want %s", args, got, want)
		}
	}
	f([]string{"name", "--n", "3"}, `["name"] 3 false`)
	f([]string{"--n", "3", "name"}, `["name"] 3 false`)
	f([]string{"a", "-n=2", "b"}, `["a" "b"] 2 false`)
	f([]string{"a", "--", "-n"}, `["a" "-n"] 0 false`)
	f([]string{"a", "--bad"}, `[] 0 true`)
}
