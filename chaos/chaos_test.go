package chaos

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"sluice/batch"
	"sluice/internal/peer"
	"sluice/internal/testbroker"
)

// The chaos harness against real broker processes (the sluice binary, as `sluice chaos`
// runs it). The long run is `make chaos`; these are short and bounded.

// shortRun is the fault phase of the test runs, after every fault was injected once.
const shortRun = 10 * time.Second

// TestEmbeddedChaos runs every embedded fault under load and checks the history: nothing
// acknowledged as persisted lost, nothing duplicated or reordered, no offset read two
// ways at or below C.
func TestEmbeddedChaos(t *testing.T) {
	var log bytes.Buffer
	cfg := Config{Binary: testbroker.Binary(t), Dir: t.TempDir(), Duration: shortRun, Interval: time.Second,
		Seed: time.Now().UnixNano(), Rate: 300, ProducerLife: 2 * time.Second, Log: &log}
	checkRun(t, cfg, &log, EmbeddedFaults, "broker.log")
}

// TestDistributedChaos runs every distributed fault once or more under load, on a real
// ZooKeeper and HDFS: the same checks, across broker failovers.
func TestDistributedChaos(t *testing.T) {
	if _, err := peer.Install("zk-peer", "SLUICE_ZK_HOME"); err != nil {
		peer.Fail(t, "SLUICE_SKIP_ZK", err)
	}
	if _, err := peer.Install("hdfs-peer", "SLUICE_HDFS_HOME"); err != nil {
		peer.Fail(t, "SLUICE_SKIP_HDFS", err)
	}
	var log bytes.Buffer
	cfg := Config{Binary: testbroker.Binary(t), Dir: t.TempDir(), Duration: shortRun, Interval: time.Second,
		Seed: time.Now().UnixNano(), Rate: 200, HDFSOutage: 2 * time.Second, Distributed: true, ProducerLife: 2 * time.Second,
		Log: &log}
	checkRun(t, cfg, &log, DistributedFaults, "broker-1.log")
}

// checkRun runs cfg and fails unless the run is OK, every one of faults was injected or
// skipped saying why, records were persisted and read back, and records were sent in
// batches of every codec (the default: none, zstd, s2 and lz4).
func checkRun(t *testing.T, cfg Config, log *bytes.Buffer, faults []string, brokerLog string) {
	t.Helper()
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	res.WriteTable(&table)
	t.Logf("seed %d\n%s\n%s", cfg.Seed, log.String(), table.String())
	if !res.OK() {
		t.Fatalf("the chaos run failed (seed %d); %s:\n%s", cfg.Seed, brokerLog, tail(filepath.Join(cfg.Dir, "logs", brokerLog)))
	}
	for _, name := range faults {
		f := res.fault(name)
		if f.Skipped == "" && f.Cycles == 0 {
			t.Errorf("fault %s was neither injected nor skipped", name)
		}
		if f.Skipped != "" {
			t.Logf("fault %s skipped on this machine: %s", name, f.Skipped)
		}
	}
	if res.Report.Acks["persisted"] == 0 || res.Report.Distinct == 0 {
		t.Fatalf("the workload persisted %d records and %d were read", res.Report.Acks["persisted"], res.Report.Distinct)
	}
	for c := batch.CodecNone; c <= batch.CodecLZ4; c++ {
		if res.Codecs[c.String()] == 0 {
			t.Errorf("no record was sent with codec %v: %v", c, res.Codecs)
		}
	}
}

// TestInterruptedRunStopsItsProcesses: a run whose context ends while faults run
// returns without a check, saying why, and every process it started is gone.
func TestInterruptedRunStopsItsProcesses(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(3*time.Second, cancel)
	res, err := Run(ctx, Config{Binary: testbroker.Binary(t), Dir: dir, Duration: time.Hour, Faults: []string{"pause", "diskfull"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK() || res.Report != nil || len(res.Errors) == 0 {
		t.Fatalf("an interrupted run: OK=%v, report %v, errors %q", res.OK(), res.Report, res.Errors)
	}
	pids := startedPids(t, filepath.Join(dir, "logs"))
	if len(pids) == 0 {
		t.Fatal("no process was started")
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists after the run (%v)", pid, err)
		}
	}
}

// startedPids returns the pids the run's process logs name.
func startedPids(t *testing.T, logs string) []int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(logs, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	re := regexp.MustCompile(`(?m)^=== \S+ pid (\d+):`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			pid, _ := strconv.Atoi(string(m[1]))
			pids = append(pids, pid)
		}
	}
	return pids
}

// tail returns the end of a file, for a failure message.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	return string(b[max(0, len(b)-4000):])
}

func TestConfigValidate(t *testing.T) {
	bad := []Config{
		{Dir: "d"},
		{Binary: "b"},
		{Binary: "b", Dir: "d", Faults: []string{"zk-restart"}},
		{Binary: "b", Dir: "d", ValueSize: 10},
	}
	for _, c := range bad {
		c.EnsureDefaults()
		if err := c.Validate(); err == nil {
			t.Errorf("%s: valid", c.String())
		}
	}
	good := Config{Binary: "b", Dir: "d"}
	good.EnsureDefaults()
	if err := good.Validate(); err != nil || len(good.Faults) != len(EmbeddedFaults) {
		t.Fatalf("defaults: %v, faults %v", err, good.Faults)
	}
}

// TestEveryFaultIsDrawn: every fault of either mode, and one the weights table does not
// name, can be drawn (weighs 1 or more).
func TestEveryFaultIsDrawn(t *testing.T) {
	all := append(append([]string{"unlisted"}, EmbeddedFaults...), DistributedFaults...)
	drawn := map[string]int{}
	for _, n := range weighted(all) {
		drawn[n]++
	}
	for _, n := range all {
		if drawn[n] < 1 {
			t.Errorf("fault %s is never drawn", n)
		}
	}
}
