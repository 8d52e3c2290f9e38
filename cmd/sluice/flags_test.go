package main

import (
	"bytes"
	"strings"
	"testing"
)

// runIn runs sluice in this process and returns its exit status and output.
func runIn(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestHelp: -help and -h print the command's usage and flags to stdout and exit 0, for
// every command and for sluice itself (it exited 2 with "flag: help requested").
func TestHelp(t *testing.T) {
	for name := range commands() {
		for _, flag := range []string{"-help", "-h", "--help"} {
			args := append(strings.Fields(name), flag)
			code, out, errOut := runIn(args...)
			if code != 0 || !strings.HasPrefix(out, "usage: sluice "+name) || !strings.Contains(out, "flags:\n") || errOut != "" {
				t.Fatalf("sluice %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
			}
		}
	}
	if code, out, _ := runIn("-help"); code != 0 || !strings.Contains(out, "topic describe") {
		t.Fatalf("sluice -help: exit %d\n%s", code, out)
	}
	if code, _, errOut := runIn("nonsense"); code != 2 || !strings.Contains(errOut, "usage: sluice COMMAND") {
		t.Fatalf("sluice nonsense: exit %d\n%s", code, errOut)
	}
	// A command group's -help prints its subcommands to stdout and exits 0 (it printed the
	// global usage and exited 2); the group without a subcommand, or with an unknown one,
	// is still a usage error.
	for _, group := range []string{"topic", "segment", "user", "bench", "acl", "cluster"} {
		for _, flag := range []string{"-help", "-h", "--help"} {
			code, out, errOut := runIn(group, flag)
			if code != 0 || !strings.HasPrefix(out, "usage: sluice "+group+" SUBCOMMAND") || errOut != "" {
				t.Fatalf("sluice %s %s: exit %d\nstdout: %s\nstderr: %s", group, flag, code, out, errOut)
			}
			for name := range commands() {
				if in := strings.HasPrefix(name, group+" "); in != strings.Contains(out, "  "+name) {
					t.Fatalf("sluice %s %s: %q listed %v\n%s", group, flag, name, !in, out)
				}
			}
		}
		if code, out, errOut := runIn(group); code != 2 || out != "" || !strings.Contains(errOut, "usage: sluice "+group+" SUBCOMMAND") {
			t.Fatalf("sluice %s: exit %d\nstdout: %s\nstderr: %s", group, code, out, errOut)
		}
		if code, out, errOut := runIn(group, "nonsense"); code != 2 || out != "" || !strings.Contains(errOut, "unknown subcommand "+group+" nonsense") {
			t.Fatalf("sluice %s nonsense: exit %d\nstdout: %s\nstderr: %s", group, code, out, errOut)
		}
	}
}

// TestHelpSaysWhatSurprises: the help says what a new user did not expect: produce drops
// a \r before a line's \n, consume --positions moves an offset out of range to the
// partition's end or start, segment verify is for a stopped broker's directory.
func TestHelpSaysWhatSurprises(t *testing.T) {
	for _, c := range []struct{ args, want []string }{
		{[]string{"produce", "-help"}, []string{`lines end at \n or \r\n`}},
		{[]string{"consume", "-help"}, []string{"past a partition's end starts at its end", "below its start", "the others at --from"}},
		{[]string{"segment", "verify", "-help"}, []string{"stopped broker", "torn tail"}},
	} {
		code, out, _ := runIn(c.args...)
		for _, want := range c.want {
			if code != 0 || !strings.Contains(out, want) {
				t.Fatalf("sluice %s: exit %d, want %q in\n%s", strings.Join(c.args, " "), code, want, out)
			}
		}
	}
}

// TestUsageErrors: bad flags exit 2 with the usage, before anything is sent: negative
// durations (they were accepted, and a negative --timeout meant none), and topic options
// out of range, millisecond ones above what a duration holds (they overflowed in the
// broker).
func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	f := func(want string, args ...string) {
		t.Helper()
		code, _, errOut := runIn(args...)
		if code != 2 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "usage: sluice") {
			t.Fatalf("sluice %s: exit %d, want 2 and %q\n%s", strings.Join(args, " "), code, want, errOut)
		}
	}
	neg := "must not be negative"
	f("--idle -1s: "+neg, "consume", "--topic", "t", "--idle", "-1s")
	f("--timeout -1s: "+neg, "consume", "--topic", "t", "--timeout", "-1s")
	f("--timeout -1m0s: "+neg, "produce", "--topic", "t", "--timeout", "-1m")
	f("--timeout -2s: "+neg, "topic", "create", "t", "--timeout", "-2s")
	f("--timeout -1ms: "+neg, "topic", "describe", "t", "--timeout", "-1ms")
	f("--duration -1s: "+neg, "bench", "produce", "--duration", "-1s")
	f("log.retention: -1h0m0s "+neg, "broker", "-data", dir, "-log.retention", "-1h")
	f("log.fsync_interval: -5ms "+neg, "broker", "-data", dir, "-log.fsync_interval", "-5ms")
	f("--segment-ms 9223372036855 out of -1..9223372036854", "topic", "create", "t", "--segment-ms", "9223372036855")
	f("--retention-ms 10000000000000 out of", "topic", "create", "t", "--retention-ms", "10000000000000")
	f("--retention-ms -2 out of", "topic", "create", "t", "--retention-ms", "-2")
	f("--segment-bytes -1 is negative", "topic", "create", "t", "--segment-bytes", "-1")
	f("--retention-bytes -2 below -1", "topic", "create", "t", "--retention-bytes", "-2")
	f("unexpected argument x", "broker", "-data", dir, "x")
	f(`auth.source "ldap": want file or zk`, "broker", "-data", dir, "-auth.source", "ldap")
	f("--file and --zk exclude each other", "acl", "list", "--file", dir+"/acls", "--zk", "127.0.0.1:1")

	// auth.source zk needs a cluster and excludes the files: the broker does not start.
	for _, args := range [][]string{
		{"broker", "-data", dir, "-auth.source", "zk"},
		{"broker", "-data", dir, "-auth.source", "zk", "-auth.users", dir + "/users"},
	} {
		code, _, errOut := runIn(args...)
		if code != 1 || !strings.Contains(errOut, "auth.source zk") {
			t.Fatalf("sluice %s: exit %d\n%s", strings.Join(args, " "), code, errOut)
		}
	}
}
