package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSegmentCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "p0")
	exec := func(want int, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if got := run(args, strings.NewReader(""), &out, &errOut); got != want {
			t.Fatalf("sluice %v: exit %d, want %d\n%s%s", args, got, want, out.String(), errOut.String())
		}
		return out.String() + errOut.String()
	}
	exec(0, "segment", "demo", "-batches", "300", dir)
	if out := exec(0, "segment", "verify", dir); !strings.HasPrefix(out, "ok:") {
		t.Fatalf("verify: %s", out)
	}
	if out := exec(0, "segment", "dump", dir); strings.Count(out, "\n") != 301 {
		t.Fatalf("dump printed %d lines", strings.Count(out, "\n"))
	}
	exec(2, "segment", "verify")
	exec(2, "segment", "verify", "a", "b")
	exec(2, "nonsense")
	exec(2, "segment", "demo", "-batches", "0", dir)
	exec(1, "segment", "verify", filepath.Join(dir, "missing"))

	seg := filepath.Join(dir, "00000000000000000000.log")
	data, _ := os.ReadFile(seg)
	data[100] ^= 0x10
	os.WriteFile(seg, data, 0o644)
	if out := exec(1, "segment", "verify", dir); !strings.Contains(out, "00000000000000000000.log at position") {
		t.Fatalf("verify of a corrupt log: %s", out)
	}

	// The damaged batch holds byte 100: the first of the demo's 10-record batches.
	before, _ := os.ReadFile(seg)
	if out := exec(0, "segment", "repair", dir, "--truncate-at", "0", "--dry-run"); !strings.Contains(out, "dry run: nothing changed") {
		t.Fatalf("repair dry run: %s", out)
	}
	if after, _ := os.ReadFile(seg); !bytes.Equal(before, after) {
		t.Fatal("a dry run changed the segment")
	}
	exec(2, "segment", "repair", dir)
	exec(1, "segment", "repair", dir, "--truncate-at", "5")
	if out := exec(0, "segment", "repair", "--truncate-at", "0", dir); !strings.Contains(out, "done") {
		t.Fatalf("repair: %s", out)
	}
	if out := exec(0, "segment", "verify", dir); !strings.Contains(out, "holds no batches") {
		t.Fatalf("verify after the repair: %s", out)
	}
}

func TestBrokerConfig(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "sluice.conf")
	os.WriteFile(conf, []byte("# comment\ndata = /srv/x\narena.size = 2GiB\nlog.fsync = never\nsched.pin = true\nsched.cores = 0, 1\n"), 0o644)
	f := newBrokerFlags()
	if err := f.fs.Parse([]string{"-config", conf, "-arena-size", "3GiB"}); err != nil {
		t.Fatal(err)
	}
	if err := f.readConfigFile(map[string]bool{"arena.size": true}); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.brokerConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != "/srv/x" || cfg.Arena.Size != 3<<30 || cfg.Log.Sync.String() != "never" || !cfg.Sched.Pin || len(cfg.Sched.Cores) != 2 {
		t.Fatalf("config: %+v", cfg)
	}
	os.WriteFile(conf, []byte("arena.sise = 2GiB\n"), 0o644)
	if err := f.readConfigFile(nil); err == nil || !strings.Contains(err.Error(), "arena.sise") {
		t.Fatalf("unknown key: %v", err)
	}
	// A line longer than a bufio.Scanner takes (64 KiB) is read like any other: the
	// settings after it are not dropped.
	long := "# " + strings.Repeat("x", 70_000) + "\n"
	os.WriteFile(conf, []byte(long+"data = /srv/y\nauth.users = /etc/sluice/users\n"), 0o644)
	f = newBrokerFlags()
	f.fs.Parse([]string{"-config", conf})
	if err := f.readConfigFile(nil); err != nil || *f.settings["data"] != "/srv/y" || *f.settings["auth.users"] != "/etc/sluice/users" {
		t.Fatalf("after a long line: %v, data %q, auth.users %q", err, *f.settings["data"], *f.settings["auth.users"])
	}
	f = newBrokerFlags()
	f.fs.Parse([]string{"-data", dir, "-arena.size", "lots", "-log.fsync", "sometimes", "-sched.pin", "maybe", "-arena.prefault", "often"})
	_, err = f.brokerConfig(nil)
	for _, key := range []string{"arena.size", "log.fsync: ", "sometimes", "sched.pin: ", "arena.prefault: "} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Fatalf("bad values: the error does not name %q: %v", key, err)
		}
	}
}

// TestInsecureListen: a listen address other than loopback is refused without both TLS
// and authentication unless -insecure is given; loopback needs nothing.
func TestInsecureListen(t *testing.T) {
	tls := []string{"-tls.cert", "c.pem", "-tls.key", "k.pem"}
	authn := []string{"-auth.users", "users"}
	for _, c := range []struct {
		listen   string
		insecure bool
		more     []string
		ok       bool
	}{
		{"127.0.0.1:9440", false, nil, true},
		{"[::1]:9440", false, nil, true},
		{"localhost:9440", false, nil, true},
		{"0.0.0.0:9440", false, nil, false},
		{":9440", false, nil, false},
		{"10.1.2.3:9440", false, nil, false},
		{"0.0.0.0:9440", true, nil, true},
		{"10.1.2.3:9440", false, tls, false},
		{"10.1.2.3:9440", false, authn, false},
		{"10.1.2.3:9440", false, append(tls, authn...), true},
		{"10.1.2.3:9440", true, authn, true},
	} {
		args := append([]string{"-listen", c.listen}, c.more...)
		if c.insecure {
			args = append(args, "-insecure")
		}
		err := validateFlags(t, args...)
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), "-insecure")) {
			t.Errorf("listen %s insecure %v %v: %v", c.listen, c.insecure, c.more, err)
		}
	}
}

// TestMetricsListen: a -metrics address other than loopback is refused unless asked for:
// the metrics alone with -metrics.public or -insecure, pprof only with -insecure (it
// was served anywhere, in plaintext without authentication, with no refusal).
func TestMetricsListen(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // in the error; "" for none
	}{
		{[]string{"-metrics", "127.0.0.1:9441", "-pprof"}, ""},
		{[]string{"-metrics", "localhost:9441", "-pprof"}, ""},
		{[]string{"-metrics", "0.0.0.0:9441"}, "-metrics.public"},
		{[]string{"-metrics", ":9441"}, "-metrics.public"},
		{[]string{"-metrics", "10.1.2.3:9441", "-metrics.public"}, ""},
		{[]string{"-metrics", "0.0.0.0:9441", "-insecure"}, ""},
		{[]string{"-metrics", "0.0.0.0:9441", "-pprof"}, "-insecure"},
		{[]string{"-metrics", "0.0.0.0:9441", "-pprof", "-metrics.public"}, "-insecure"},
		{[]string{"-metrics", "0.0.0.0:9441", "-pprof", "-insecure"}, ""},
		{[]string{"-pprof", "-metrics.public"}, ""}, // no metrics served
	} {
		err := validateFlags(t, c.args...)
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: %v, want an error naming %q", c.args, err, c.want)
		}
	}
}

// validateFlags returns what the broker's Config.Validate says of the flags (with a
// data directory added).
func validateFlags(t *testing.T, args ...string) error {
	t.Helper()
	f := newBrokerFlags()
	if err := f.fs.Parse(append([]string{"-data", t.TempDir()}, args...)); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.brokerConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.EnsureDefaults()
	return cfg.Validate()
}

// TestAdminMetricsListen: the admin's -metrics follows the broker's rule: an address
// other than loopback is a usage error (exit 2) unless -metrics.public, before it
// dials ZooKeeper.
func TestAdminMetricsListen(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"admin", "-zk", "127.0.0.1:1", "-metrics", "0.0.0.0:0"}, strings.NewReader(""), &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "-metrics.public") {
		t.Fatalf("sluice admin -metrics 0.0.0.0:0: exit %d, want 2 naming -metrics.public:\n%s", code, errOut.String())
	}
}
