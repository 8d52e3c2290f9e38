package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sluice/memarena"
)

// TestTuneWritesAConfig: what `sluice tune` prints for this host is a config file the
// broker takes as it is, and the configuration it makes is valid.
func TestTuneWritesAConfig(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := tuneHost([]string{"-data", dir}, nil, &out, nil); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "sluice.conf")
	if err := os.WriteFile(file, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newBrokerFlags()
	f.config = file
	*f.settings["data"] = dir
	if err := f.readConfigFile(nil); err != nil {
		t.Fatalf("the broker refuses tune's output: %v\n%s", err, out.String())
	}
	cfg, err := f.brokerConfig(nil)
	if err != nil {
		t.Fatalf("tune's output makes a bad config: %v\n%s", err, out.String())
	}
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("tune's output makes an invalid config: %v\n%s", err, out.String())
	}
	if want := *newTunedFlags(t, file).settings["arena.size"]; cfg.Arena.Size == memarena.DefaultSize && want != "1GiB" {
		t.Fatalf("the arena kept its default size, not tune's %s", want)
	}
}

// TestTuneRefusesArguments: tune takes no positional argument (it ignored one and
// exited 0), like every other command: a usage error, exit 2, before the host is read.
func TestTuneRefusesArguments(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{"tune", "-data", dir, "extra"}, {"tune", "extra", "-data", dir}} {
		code, out, errOut := runIn(args...)
		if code != 2 || out != "" || !strings.Contains(errOut, "unexpected argument extra") || !strings.Contains(errOut, "usage: sluice tune") {
			t.Fatalf("sluice %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
		}
	}
}

// newTunedFlags reads a config file into fresh broker flags.
func newTunedFlags(t *testing.T, file string) *brokerFlags {
	t.Helper()
	f := newBrokerFlags()
	f.config = file
	if err := f.readConfigFile(nil); err != nil {
		t.Fatal(err)
	}
	return f
}
