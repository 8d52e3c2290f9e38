package test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sluice/internal/testbroker"
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
