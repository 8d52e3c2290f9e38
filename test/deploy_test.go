package test

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"sluice/internal/spawn"
	"sluice/internal/testbroker"
	"sluice/wire"
)

// TestSystemdUnit checks deploy/sluice.service with `systemd-analyze verify` (with the
// sluice binary of this build in place of /usr/local/bin/sluice, which verify insists
// exists), and that every flag its ExecStart passes is one the broker takes.
func TestSystemdUnit(t *testing.T) {
	raw, err := os.ReadFile("../deploy/sluice.service")
	if err != nil {
		t.Fatal(err)
	}
	bin := testbroker.Binary(t)
	unit := strings.ReplaceAll(string(raw), "/usr/local/bin/sluice", bin)
	var exec0 string
	for _, l := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(l, "ExecStart="); ok {
			exec0 = v
		}
	}
	help, _ := exec.Command(bin, "broker", "-help").CombinedOutput()
	for _, f := range strings.Fields(exec0) {
		if strings.HasPrefix(f, "-") && !strings.Contains(string(help), "  "+f+" ") && !strings.Contains(string(help), "  "+f+"\n") {
			t.Errorf("ExecStart passes %s, which `sluice broker` does not take", f)
		}
	}
	env, err := os.ReadFile("../deploy/sluice.env")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"SLUICE_DATA=", "SLUICE_LISTEN=", "SLUICE_METRICS=", "SLUICE_ARGS="} {
		if !strings.Contains(string(env), "\n"+v) {
			t.Errorf("deploy/sluice.env does not set %s the unit uses", strings.TrimSuffix(v, "="))
		}
	}
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed here: the unit's syntax is not verified (the flags above are)")
	}
	path := filepath.Join(t.TempDir(), "sluice.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sa, "verify", path).CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestReloadWhileStarting: a SIGHUP (systemctl reload, say from a certificate renewal)
// that comes while the broker is still starting does not kill it; it is taken as a
// reload once the broker serves. Go's default for SIGHUP is to exit, and systemd counts
// an exit by SIGHUP as clean: Restart=on-failure would not start the broker again. The
// config file is a FIFO, so the test knows the process is inside its start (reading its
// config) when the signal is sent.
func TestReloadWhileStarting(t *testing.T) {
	dir := t.TempDir()
	conf, ready := filepath.Join(dir, "sluice.conf"), filepath.Join(dir, "ready")
	if err := syscall.Mkfifo(conf, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testbroker.Binary(t), "broker", "-data", t.TempDir(), "-listen", "127.0.0.1:0",
		"-config", conf, "-ready-file", ready)
	out := &syncBuf{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := spawn.Start(cmd); err != nil { // dies with the test binary
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	defer func() {
		cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}()
	fifo, err := os.OpenFile(conf, os.O_WRONLY, 0) // returns once the broker opened its config
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	fifo.WriteString("# sluice.conf: every setting at its default\n")
	fifo.Close()
	for deadline := time.Now().Add(time.Minute); ; {
		if raw, err := os.ReadFile(ready); err == nil && len(raw) > 0 {
			mustOK(t, dial(t, strings.Fields(string(raw))[0]).call(&wire.MetadataRequest{})) // it serves
			break
		}
		select {
		case <-done:
			t.Fatalf("a SIGHUP during the start ended the broker: %v\n%s", cmd.ProcessState, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broker did not serve within a minute\n%s", out.String())
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	<-done
	if !cmd.ProcessState.Success() {
		t.Fatalf("the broker's stop: %v\n%s", cmd.ProcessState, out.String())
	}
}

// TestInsecureLogLine: a broker given -insecure on an address other than loopback
// serves, and says at start, loudly, what is off.
func TestInsecureLogLine(t *testing.T) {
	b := testbroker.Start(t, t.TempDir(), "-listen", "0.0.0.0:0", "-insecure")
	if log := b.Log(); !strings.Contains(log, "level=WARN msg=\"INSECURE: serving a non-loopback address with TLS and authentication off") {
		t.Fatalf("no INSECURE line at start:\n%s", log)
	}
}

// TestMetricsAddress: a broker asked for pprof on an address other than loopback does
// not start (exit 1, saying why and what would allow it); with -metrics.public it serves
// the metrics there, without pprof, and says so at start; with -insecure pprof too, with
// an INSECURE line.
func TestMetricsAddress(t *testing.T) {
	code, _, errOut := testbroker.Run(t, "", "broker", "-data", t.TempDir(), "-metrics", "0.0.0.0:0", "-pprof")
	if code != 1 || !strings.Contains(errOut, "-pprof is on") || !strings.Contains(errOut, "-insecure") {
		t.Fatalf("pprof on 0.0.0.0: exit %d\n%s", code, errOut)
	}
	b := testbroker.Start(t, t.TempDir(), "-metrics", "0.0.0.0:0", "-metrics.public")
	if !strings.Contains(b.Log(), "level=WARN msg=\"serving metrics on a non-loopback address") {
		t.Fatalf("no warning at start:\n%s", b.Log())
	}
	if v := scrape(t, b.MetricsAddr, "sluice_connections"); v < 0 {
		t.Fatal("no metrics on the public address")
	}
	if code := httpStatus(t, "http://"+b.MetricsAddr+"/debug/pprof/"); code != http.StatusNotFound {
		t.Fatalf("pprof without -pprof: HTTP %d", code)
	}
	b = testbroker.Start(t, t.TempDir(), "-metrics", "0.0.0.0:0", "-pprof", "-insecure")
	if !strings.Contains(b.Log(), "level=WARN msg=\"INSECURE: serving pprof on a non-loopback address") {
		t.Fatalf("no INSECURE line at start:\n%s", b.Log())
	}
	if code := httpStatus(t, "http://"+b.MetricsAddr+"/debug/pprof/"); code != http.StatusOK {
		t.Fatalf("pprof with -insecure: HTTP %d", code)
	}
}

// httpStatus returns the status of a GET of url.
func httpStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
