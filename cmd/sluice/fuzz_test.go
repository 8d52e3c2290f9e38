package main

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sluice/client"
)

// FuzzReadConfigFile reads an arbitrary broker config file (key = value lines), with the
// listen key given as a flag, then turns the settings into a broker configuration (the
// zk.auth key, which names a file to read, left out). It checks: no panic; the file is
// refused exactly when one of its lines, other than blanks and # comments, is not
// KEY = VALUE with a known key, and the error names the file and that line's number;
// an accepted file sets every key it gives, each to the last value it gives, except the
// one the flag set, and nothing else; those settings written out as a config file read
// back the same; and brokerConfig answers a configuration or an error, whose durations,
// when it answers one, are not negative.
func FuzzReadConfigFile(f *testing.F) {
	var tuned bytes.Buffer
	if err := tuneHost([]string{"-data", f.TempDir()}, nil, &tuned, nil); err != nil {
		f.Fatal(err)
	}
	f.Add(tuned.Bytes())
	for _, conf := range []string{
		"# comment\ndata = /srv/x\narena.size = 2GiB\nlog.fsync = never\nsched.pin = true\nsched.cores = 0, 1\n",
		"data=/srv/x\r\nlisten = 0.0.0.0:9440\r\nnet.send_timeout = never\r\n",
		"  data = /srv/x  \n\n\t# indented comment\nlog.retention = 168h\nlog.retention = 24h\nbroker.capacity = 2.5\n",
		"data = /srv/x", "", "\n\n", "# only a comment",
		"arena.sise = 2GiB\n", "data /srv/x\n", "= /srv/x\n", "data = /srv/x\nbogus\n",
		"data = /srv/x\nlog.retention = -1h\narena.size = lots\nsched.pin = maybe\nshards = x\n",
	} {
		f.Add([]byte(conf))
	}
	f.Fuzz(func(t *testing.T, conf []byte) {
		file := filepath.Join(t.TempDir(), "sluice.conf")
		if err := os.WriteFile(file, conf, 0o644); err != nil {
			t.Fatal(err)
		}
		fl := newBrokerFlags()
		fl.config = file
		*fl.settings["listen"] = "flag"
		set := map[string]bool{"listen": true}
		want, badLine := configModel(string(conf), set)
		err := fl.readConfigFile(set)
		if badLine > 0 {
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("config file %s line %d:", file, badLine)) {
				t.Fatalf("config %s: line %d is bad, read with %v", short(conf), badLine, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("config %s refused: %v", short(conf), err)
		}
		want["listen"] = "flag"
		got := settingsOf(fl)
		for k := range brokerKeys {
			if k := brokerKeys[k][0]; got[k] != want[k] {
				t.Fatalf("config %s: setting %s is %q, want %q", short(conf), k, got[k], want[k])
			}
		}

		var out strings.Builder
		for k, v := range got {
			fmt.Fprintf(&out, "%s = %s\n", k, v)
		}
		if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		again := newBrokerFlags()
		again.config = file
		if err := again.readConfigFile(nil); err != nil {
			t.Fatalf("settings %v written as %q are refused: %v", got, out.String(), err)
		}
		if back := settingsOf(again); !maps.Equal(back, got) {
			t.Fatalf("settings %v written as %q read back as %v", got, out.String(), back)
		}

		*fl.settings["zk.auth"] = "" // a file name: not read here
		cfg, err := fl.brokerConfig(nil)
		if err != nil {
			return
		}
		for k, d := range map[string]time.Duration{
			"log.fsync_interval": cfg.Log.SyncInterval, "log.retention": cfg.Log.RetentionAge, "net.frame_timeout": cfg.Net.FrameTimeout,
			"broker.max_wait": cfg.MaxWait, "broker.retention_check": cfg.RetentionCheck, "hdfs.commit_interval": cfg.HDFS.CommitInterval,
			"hdfs.timeout": cfg.HDFS.Conn.Timeout, "auth.failure_delay": cfg.Auth.FailureDelay, "auth.reload_interval": cfg.Auth.ReloadInterval,
			"auth.timeout": cfg.Auth.Timeout, "zk.session_timeout": cfg.Cluster.SessionTimeout,
		} {
			if d < 0 {
				t.Fatalf("config %s accepted with %s %v", short(conf), k, d)
			}
		}
		if cfg.Net.SendTimeout < 0 && got["net.send_timeout"] != "never" {
			t.Fatalf("config %s accepted with net.send_timeout %v", short(conf), cfg.Net.SendTimeout)
		}
	})
}

// configModel is what a config file means, read line by line on its own: the settings
// it gives (keys that set says a flag gave left out) and the number of its first bad
// line (0: none).
func configModel(conf string, set map[string]bool) (map[string]string, int) {
	known := map[string]bool{}
	for _, k := range brokerKeys {
		known[k[0]] = true
	}
	want := map[string]string{}
	for n, line := range strings.Split(conf, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || !known[k] {
			return nil, n + 1
		}
		if !set[k] {
			want[k] = v
		}
	}
	return want, 0
}

// short quotes a config for a message, its middle cut when it is long.
func short(conf []byte) string {
	if len(conf) <= 200 {
		return strconv.Quote(string(conf))
	}
	return fmt.Sprintf("of %d bytes %q...%q", len(conf), conf[:100], conf[len(conf)-100:])
}

// settingsOf returns the settings of f that are set (not empty).
func settingsOf(f *brokerFlags) map[string]string {
	out := map[string]string{}
	for k, p := range f.settings {
		if *p != "" {
			out[k] = *p
		}
	}
	return out
}

// FuzzParseFrom parses arbitrary --from values of sluice consume. It checks: no panic;
// "oldest" and "newest" are those starts; a value accepted otherwise is a decimal offset
// not below zero, which starts at that offset, or an RFC 3339 time, which starts at its
// millisecond; the start written back as a --from value (the offset in decimal, the time
// in RFC 3339) parses to the same start; a refused value gets a usage error that quotes
// it.
func FuzzParseFrom(f *testing.F) {
	for _, s := range []string{
		"oldest", "newest", "0", "42", "9223372036854775807", "+7", "007",
		"2026-01-02T03:04:05Z", "2026-01-02T03:04:05.123456789+02:00", "1969-12-31T23:59:59.999Z", "0001-01-01T00:00:00Z",
		"", "-1", "9223372036854775808", "yesterday", "Oldest", "2026-01-02", "2026-13-02T03:04:05Z",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		start, err := parseFrom(s)
		if err != nil {
			if _, ok := err.(usageError); !ok || !strings.Contains(err.Error(), strconv.Quote(s)) || start != (client.StartAt{}) {
				t.Fatalf("--from %q refused with %T %v and start %+v", s, err, err, start)
			}
			return
		}
		var again string
		if s == "oldest" || s == "newest" {
			if want := map[string]client.StartAt{"oldest": client.Oldest(), "newest": client.Newest()}[s]; start != want {
				t.Fatalf("--from %s parsed as %+v", s, start)
			}
			return
		}
		if off, err := strconv.ParseInt(s, 10, 64); err == nil {
			if off < 0 || start != client.AtOffset(off) {
				t.Fatalf("--from %q parsed as %+v", s, start)
			}
			again = strconv.FormatInt(off, 10)
		} else {
			tm, err := time.Parse(time.RFC3339Nano, s)
			if err != nil || start != client.AtTime(tm) {
				t.Fatalf("--from %q parsed as %+v (time %v, %v)", s, start, tm, err)
			}
			again = tm.Format(time.RFC3339Nano)
		}
		if start2, err := parseFrom(again); err != nil || start2 != start {
			t.Fatalf("--from %q parsed as %+v, written back as %q parses as %+v, %v", s, start, again, start2, err)
		}
	})
}

// FuzzParseLogicalRange parses arbitrary --logical values of sluice consume. It checks:
// no panic; an accepted value is A-B with A <= B, whose numbers are the ones given; that
// range written back as A-B parses to the same range; a refused value gets a usage error
// that quotes it, and the range 0-0.
func FuzzParseLogicalRange(f *testing.F) {
	for _, s := range []string{"0-65535", "7-7", "0-0", "00012-00013", "9-8", "0-65536", "12", "-", "1-2-3", "+1-2", " 1-2", "", "-1-5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lo, hi, err := parseLogicalRange(s)
		if err != nil {
			if _, ok := err.(usageError); !ok || !strings.Contains(err.Error(), strconv.Quote(s)) || lo != 0 || hi != 0 {
				t.Fatalf("--logical %q refused with %T %v and range %d-%d", s, err, err, lo, hi)
			}
			return
		}
		a, b, _ := strings.Cut(s, "-")
		x, err1 := strconv.ParseUint(a, 10, 16)
		y, err2 := strconv.ParseUint(b, 10, 16)
		if lo > hi || err1 != nil || err2 != nil || uint64(lo) != x || uint64(hi) != y {
			t.Fatalf("--logical %q parsed as %d-%d", s, lo, hi)
		}
		again := fmt.Sprintf("%d-%d", lo, hi)
		if lo2, hi2, err := parseLogicalRange(again); err != nil || lo2 != lo || hi2 != hi {
			t.Fatalf("--logical %q parsed as %d-%d, written back as %q parses as %d-%d, %v", s, lo, hi, again, lo2, hi2, err)
		}
	})
}
