package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"sluice/client"
	"sluice/internal/testbroker"
)

// sluiceCmd runs the sluice binary with stdin and returns its exit status and output.
func sluiceCmd(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	return testbroker.Run(t, stdin, args...)
}

// mustRun runs sluice and fails the test unless it exits with want.
func mustRun(t *testing.T, want int, stdin string, args ...string) string {
	t.Helper()
	code, out, errOut := sluiceCmd(t, stdin, args...)
	if code != want {
		t.Fatalf("sluice %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, out, errOut)
	}
	return out
}

// TestConsoleCommands runs topic create/describe, produce and consume end to end
// against a broker process.
func TestConsoleCommands(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	addr := b.Addr
	out := mustRun(t, 0, "", "topic", "create", "lines", "--partitions", "3", "--broker", addr)
	if !strings.Contains(out, "3 partitions") {
		t.Fatalf("create: %s", out)
	}
	mustRun(t, 0, "", "topic", "create", "lines", "--partitions", "3", "--broker", addr) // the same again
	mustRun(t, 1, "", "topic", "create", "lines", "--partitions", "2", "--broker", addr) // exists
	var in strings.Builder
	var want []string
	for i := range 500 {
		fmt.Fprintf(&in, "user%d\tclick %d\n", i%10, i)
		want = append(want, fmt.Sprintf("click %d", i))
	}
	before := time.Now().Add(-time.Second).Format(time.RFC3339)
	mustRun(t, 0, in.String(), "produce", "--broker", addr, "--topic", "lines", "--key", "--acks", "persisted")
	out = mustRun(t, 0, "", "consume", "--broker", addr, "--topic", "lines", "--from", "oldest", "--max", "500")
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("consumed %d lines, want 500: %q...", len(got), got[:min(5, len(got))])
	}
	out = mustRun(t, 0, "", "topic", "describe", "lines", "--broker", addr)
	if strings.Count(out, "\n") != 6 || !strings.Contains(out, "partitions 3") {
		t.Fatalf("describe:\n%s", out)
	}
	checkConsumeFrom(t, addr, before)
}

// checkConsumeFrom checks --from, --idle and --keys on the topic "lines" (500 records,
// keys user0..user9, all stamped after before).
func checkConsumeFrom(t *testing.T, addr, before string) {
	consume := func(args ...string) []string {
		t.Helper()
		args = append([]string{"consume", "--broker", addr, "--topic", "lines", "--idle", "500ms"}, args...)
		out := mustRun(t, 0, "", args...)
		if out == "" {
			return nil
		}
		return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	}
	if got := consume("--from", "newest"); len(got) != 0 {
		t.Fatalf("from newest: %d lines", len(got))
	}
	if got := consume("--from", before); len(got) != 500 {
		t.Fatalf("from %s: %d lines", before, len(got))
	}
	if got := consume("--from", time.Now().Add(time.Hour).Format(time.RFC3339)); len(got) != 0 {
		t.Fatalf("from the future: %d lines", len(got))
	}
	// Offsets are per partition: from offset 100, each partition skips its first 100.
	if got := consume("--from", "100", "--keys"); len(got) == 0 || len(got) >= 500 || !strings.HasPrefix(got[0], "user") {
		t.Fatalf("from offset 100 with keys: %d lines, first %q", len(got), got)
	}
}

// TestProduceExitStatus: produce exits 0 only when every line reached the level asked,
// and 2 on usage errors.
func TestProduceExitStatus(t *testing.T) {
	b := testbroker.Start(t, t.TempDir(), "-metrics", "127.0.0.1:0")
	mustRun(t, 0, "", "topic", "create", "acks", "--broker", b.Addr)
	mustRun(t, 0, "a\nb\nc\n", "produce", "--broker", b.Addr, "--topic", "acks", "--acks", "accepted")
	mustRun(t, 2, "a\n", "produce", "--broker", b.Addr, "--topic", "acks", "--acks", "maybe")
	mustRun(t, 2, "a\n", "produce", "--broker", b.Addr)
	mustRun(t, 2, "", "consume", "--broker", b.Addr, "--topic", "acks", "--from", "yesterday")
	mustRun(t, 2, "", "topic", "create", "--broker", b.Addr)
	mustRun(t, 1, "", "topic", "describe", "nosuch", "--broker", b.Addr)
	out := mustRun(t, 0, "", "consume", "--broker", b.Addr, "--topic", "acks", "--max", "3")
	if out != "a\nb\nc\n" {
		t.Fatalf("consumed %q", out)
	}
	checkProduceToStoppedBroker(t, b)
}

// checkProduceToStoppedBroker: the broker stops (SIGSTOP) after the first line is in;
// produce then exits 1 and says how many lines were not persisted.
func checkProduceToStoppedBroker(t *testing.T, b *testbroker.Broker) {
	cmd := exec.Command(testbroker.Binary(t), "produce", "--broker", b.Addr, "--topic", "acks", "--timeout", "1s")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(in, "x")
	a, err := client.NewAdmin(client.Brokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		d, err := a.DescribeTopic(context.Background(), "acks")
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("the first line never arrived: %v", err)
		}
		if d.Partitions[0].Checkpoint >= 3 && answered(t, b) { // a, b, c, then x
			break
		}
	}
	stop := signalBroker(t, b.Pid())
	defer stop()
	fmt.Fprintln(in, "y")
	in.Close()
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(errOut.String(), "1 of 2 records not persisted") {
		t.Fatalf("produce to a stopped broker: %v, %s", err, errOut.String())
	}
}

// answered reports whether the broker has answered every produce waiting for the
// checkpoint and written every answer out (C can cover a produce a moment before its
// answer leaves): twice in a row, 20 ms apart, so that an answer on its way from the
// event loop to the partition's shard is not missed.
func answered(t *testing.T, b *testbroker.Broker) bool {
	for range 2 {
		if testbroker.Scrape(t, b.MetricsAddr, `sluice_parked_requests{kind="durable"}`) != 0 ||
			testbroker.Scrape(t, b.MetricsAddr, `sluice_net_outbound_bytes{kind="queued"}`) != 0 {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// signalBroker stops the broker process (SIGSTOP) and returns what continues it.
func signalBroker(t *testing.T, pid int) func() {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	return func() { syscall.Kill(pid, syscall.SIGCONT) }
}

// TestReadLinesLimit: lines up to the largest record a batch carries become records, with
// --key or without (the separator is not part of the record); a longer one is refused
// with its line number and the limit, before it is sent. The cases run with a limit of
// 100, then at the real limit. (A line over 32 MiB failed with "bufio.Scanner: token too
// long".)
func TestReadLinesLimit(t *testing.T) {
	f := func(limit int, withKey bool, lines []string, wantSent []int, wantErr string) {
		t.Helper()
		var sent []int
		n, err := readLines(strings.NewReader(strings.Join(lines, "\n")+"\n"), withKey, limit, func(r *client.Record) error {
			sent = append(sent, len(r.Key)+len(r.Value))
			return nil
		})
		if fmt.Sprint(sent) != fmt.Sprint(wantSent) || n != len(wantSent) || (err == nil) != (wantErr == "") ||
			(err != nil && !strings.Contains(err.Error(), wantErr)) {
			t.Fatalf("limit %d: sent %v (%d), %v; want %v and %q", limit, sent, n, err, wantSent, wantErr)
		}
	}
	v := func(n int) string { return strings.Repeat("v", n) }
	f(100, false, []string{"a", v(100)}, []int{1, 100}, "")
	f(100, false, []string{"a", v(101), "b"}, []int{1}, "line 2: its record of 101 bytes is larger than the largest record, 100 bytes")
	f(100, false, []string{v(100) + "\r"}, []int{100}, "")
	f(100, false, []string{"a", "b", v(200)}, []int{1, 1}, "line 3: longer than the largest record, 100 bytes")
	f(100, true, []string{"k " + v(99)}, []int{100}, "")
	f(100, true, []string{"x y", "k\t" + v(100)}, []int{2}, "line 2: its record of 101 bytes")
	f(maxLine, false, []string{v(maxLine)}, []int{maxLine}, "")
	f(maxLine, true, []string{"k", "k " + v(maxLine)}, []int{1}, fmt.Sprintf("line 2: its record of %d bytes is larger than the largest record, %d bytes", maxLine+1, maxLine))
}

// TestReadLinesCRLF: lines end at \n or \r\n (as produce's usage says): one \r before
// the \n is dropped, any other \r stays in the record, and a last line without its \n
// is a record too.
func TestReadLinesCRLF(t *testing.T) {
	var got []string
	_, err := readLines(strings.NewReader("a\r\nb\n\rc\r\r\nd\re\nlast"), false, 100, func(r *client.Record) error {
		got = append(got, string(r.Value))
		return nil
	})
	if want := []string{"a", "b", "\rc\r", "d\re", "last"}; err != nil || fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Fatalf("records %q, %v; want %q", got, err, want)
	}
}

// TestProduceLongLine: a 33 MiB line (over the 32 MiB the line reader stopped at) goes
// through `sluice produce` and comes back whole. (A line at the limit, 64 MiB, is accepted
// by produce; the broker does not serve a fetch answer with a batch that large yet, so
// the test stays at 33 MiB.)
func TestProduceLongLine(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	mustRun(t, 0, "", "topic", "create", "long", "--broker", b.Addr)
	long := strings.Repeat("x", 33<<20)
	mustRun(t, 0, "a\n"+long+"\nb\n", "produce", "--broker", b.Addr, "--topic", "long")
	if out := mustRun(t, 0, "", "consume", "--broker", b.Addr, "--topic", "long", "--max", "3"); out != "a\n"+long+"\nb\n" {
		t.Fatalf("consumed %d bytes, want %d", len(out), len(long)+6)
	}
}

// TestProduceAcceptedDoesNotWaitForTheCheckpoint: with --acks accepted, produce exits once
// the broker has accepted every line, not once a checkpoint covers them: here no
// checkpoint moves for an hour (fsync group every hour, little data), so a produce that
// waited would not return before its 10-minute timeout (and the test binary's).
func TestProduceAcceptedDoesNotWaitForTheCheckpoint(t *testing.T) {
	b := testbroker.Start(t, t.TempDir(), "-log.fsync", "group", "-log.fsync_interval", "1h")
	mustRun(t, 0, "", "topic", "create", "slow", "--broker", b.Addr)
	mustRun(t, 0, "a\nb\nc\n", "produce", "--broker", b.Addr, "--topic", "slow", "--acks", "accepted", "--timeout", "10m")
	a, err := client.NewAdmin(client.Brokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	d, err := a.DescribeTopic(context.Background(), "slow")
	if err != nil {
		t.Fatal(err)
	}
	if p := d.Partitions[0]; p.Checkpoint >= 2 {
		t.Fatalf("the checkpoint covers the lines already (%+v): the test does not test", p)
	}
	if out := mustRun(t, 0, "", "consume", "--broker", b.Addr, "--topic", "slow", "--max", "3"); out != "a\nb\nc\n" {
		t.Fatalf("consumed %q", out)
	}
}

// TestProduceInterrupted: SIGINT stops produce while its stdin stays open, with nothing
// to read (a terminal, or a pipe whose writer is idle); it says how many lines it sent,
// exits 1, and what it sent is persisted. (produce read stdin on its main goroutine and
// looked at the signal's context only while waiting for room: it stopped only on
// SIGKILL, which this test stands in for with its one-minute bound.)
func TestProduceInterrupted(t *testing.T) {
	b := testbroker.Start(t, t.TempDir())
	mustRun(t, 0, "", "topic", "create", "open", "--broker", b.Addr)
	cmd := exec.Command(testbroker.Binary(t), "produce", "--broker", b.Addr, "--topic", "open")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer cmd.Process.Kill()
	fmt.Fprint(in, "one\ntwo\n")
	a, err := client.NewAdmin(client.Brokers(b.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		d, err := a.DescribeTopic(context.Background(), "open")
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("the lines never arrived: %v", err)
		}
		if d.Partitions[0].Checkpoint >= 1 { // offsets 0 and 1
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("produce did not stop within a minute of SIGINT")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(errOut.String(), "interrupted after 2 lines") {
		t.Fatalf("produce after SIGINT: %v, %s", err, errOut.String())
	}
	if out := mustRun(t, 0, "", "consume", "--broker", b.Addr, "--topic", "open", "--max", "2"); out != "one\ntwo\n" {
		t.Fatalf("consumed %q", out)
	}
}

// TestProduceTooLarge: a record the broker's memory can never take is refused as
// too_large, at once, instead of busy (retried until the deadline: a review found a
// 4 KiB arena answering so, since the batch and the padding a roll may put before it
// do not fit) or not_serving (a batch over arena.partition_max).
func TestProduceTooLarge(t *testing.T) {
	for _, c := range []struct {
		args []string
		line string
	}{
		{[]string{"-arena.size", "4KiB", "-arena.chunk_size", "4KiB"}, "hello"},
		{[]string{"-arena.size", "8MiB", "-arena.partition_max", "64KiB"}, strings.Repeat("x", 100_000)},
	} {
		b := testbroker.Start(t, t.TempDir(), append(c.args, "-metrics", "127.0.0.1:0")...)
		mustRun(t, 0, "", "topic", "create", "big", "--broker", b.Addr)
		code, _, errOut := sluiceCmd(t, c.line+"\n", "produce", "--broker", b.Addr, "--topic", "big", "--timeout", "10m")
		if code != 1 || !strings.Contains(errOut, "too_large") {
			t.Fatalf("broker %v, a record of %d bytes: exit %d, %s", c.args, len(c.line), code, errOut)
		}
		if n := testbroker.Scrape(t, b.MetricsAddr, `sluice_produce_refused_total{code="too_large"}`); n < 1 {
			t.Fatalf("sluice_produce_refused_total{code=\"too_large\"} is %v after the refusal", n)
		}
		b.Stop()
	}
}
