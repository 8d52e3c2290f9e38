package client_test

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"sluice/client"
)

// TestAdminLeavesHungBroker: a broker a client found hung (here stopped with SIGSTOP: its
// connections stay open, the kernel still accepts new ones, nothing answers) is left
// out of the Admin's metadata reads at once, both when the Admin's connection is to it
// with a call waiting on it and when the rotation would dial it next. The dial timeout
// is ten minutes, so an Admin that waited out its own per-try timeout (twice that) would
// fail the test's minute-long contexts instead of answering from the other broker.
func TestAdminLeavesHungBroker(t *testing.T) {
	hung, live := startBroker(t), startBroker(t)
	for _, b := range []string{hung.Addr, live.Addr} {
		createTopic(t, b, "hung", 1)
	}
	newAdmin := func() *client.Admin {
		a, err := client.NewAdmin(client.Brokers(hung.Addr, live.Addr), client.DialTimeout(10*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		return a
	}
	metadataFrom := func(a *client.Admin, what string) error {
		ts, err := a.Metadata(ctxFor(t, time.Minute), "hung")
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if len(ts) != 1 || len(ts[0].Partitions) != 1 || ts[0].Partitions[0].Addr != live.Addr {
			return fmt.Errorf("%s: metadata %+v, want the topic at %s", what, ts, live.Addr)
		}
		return nil
	}

	waiting := newAdmin()
	if _, err := waiting.Metadata(ctxFor(t, time.Minute), "hung"); err != nil { // connects to the first seed
		t.Fatal(err)
	}
	resume := signal(t, hung.Pid(), syscall.SIGSTOP)
	defer resume()
	waitStopped(t, hung.Pid()) // kill returns before every thread has stopped

	// A call waiting on the hung broker's connection when a client finds it hung.
	done := make(chan error, 1)
	go func() { done <- metadataFrom(waiting, "the call waiting on the hung broker") }()
	time.Sleep(200 * time.Millisecond) // most likely waiting by now; either way it must not hang
	client.Shun(waiting, hung.Addr)
	if err := <-done; err != nil { // within the call's minute
		t.Fatal(err)
	}

	// A new Admin, whose first seed is the hung broker, told before its first call.
	fresh := newAdmin()
	client.Shun(fresh, hung.Addr)
	if err := metadataFrom(fresh, "the first call after the broker was found hung"); err != nil {
		t.Fatal(err)
	}
}

// waitStopped waits until every thread of process pid is stopped (state T in
// /proc/PID/task/*/stat): a SIGSTOP's kill returns before they all are, and a thread
// still running may answer one more request.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	waitUntil(t, func() bool {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
			if err != nil {
				return false // a thread that exited meanwhile: look again
			}
			// The state follows the command's closing parenthesis: "pid (comm) S ...".
			i := bytes.LastIndexByte(stat, ')')
			if i < 0 || i+2 >= len(stat) || stat[i+2] != 'T' {
				return false
			}
		}
		return true
	})
}
