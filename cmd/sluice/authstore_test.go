package main

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"sluice/internal/peer/zktest"
)

// TestUserAndACLCommandsOnZK: with --zk the user and acl commands edit the cluster's
// znodes (--zk-root respected), list them, refuse --file with --zk, and two operators
// granting at once (two goroutines, each its own session) lose nothing.
func TestUserAndACLCommandsOnZK(t *testing.T) {
	s := zktest.Start(t)
	zk := []string{"--zk", s.Addr, "--zk-root", "/c1"}
	exec := func(want int, stdin string, args ...string) string {
		t.Helper()
		var out, errOut strings.Builder
		if got := run(args, strings.NewReader(stdin), &out, &errOut); got != want {
			t.Fatalf("sluice %v: exit %d, want %d\n%s%s", args, got, want, out.String(), errOut.String())
		}
		return out.String() + errOut.String()
	}
	if out := exec(1, "", append([]string{"user", "list"}, zk...)...); !strings.Contains(out, "/c1/security/users") {
		t.Fatalf("listing a missing users znode: %s", out)
	}
	if out := exec(0, "secret one\n", append([]string{"user", "add", "alice"}, zk...)...); !strings.Contains(out, "/c1/security/users") {
		t.Fatalf("user add: %s", out)
	}
	exec(0, "secret two\n", append([]string{"user", "add", "bob"}, zk...)...)
	if out := exec(1, "x\n", append([]string{"user", "add", "bob"}, zk...)...); !strings.Contains(out, "--replace") {
		t.Fatalf("adding bob twice: %s", out)
	}
	if out := exec(0, "", append([]string{"user", "list"}, zk...)...); out != "alice\tSCRAM-SHA-256\titerations=4096\nbob\tSCRAM-SHA-256\titerations=4096\n" {
		t.Fatalf("list:\n%s", out)
	}
	exec(0, "", append([]string{"user", "remove", "bob"}, zk...)...)
	exec(1, "", append([]string{"user", "remove", "bob"}, zk...)...)
	exec(2, "pw\n", append([]string{"user", "add", "carol", "--file", t.TempDir() + "/users"}, zk...)...)
	exec(2, "", append([]string{"acl", "list", "--file", t.TempDir() + "/acls"}, zk...)...)
	if out := exec(1, "", "user", "list", "--zk", s.Addr); !strings.Contains(out, "/sluice/security/users") { // another root
		t.Fatalf("the default root has users: %s", out)
	}

	// Two operators at once: every grant lands.
	const each = 6
	var wg sync.WaitGroup
	for op := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				var out, errOut strings.Builder
				args := append([]string{"acl", "add", "--user", fmt.Sprintf("u%d", op), "--topic", fmt.Sprintf("t%d", i), "--ops", "produce"}, zk...)
				if got := run(args, strings.NewReader(""), &out, &errOut); got != 0 {
					t.Errorf("sluice %v: exit %d\n%s", args, got, errOut.String())
				}
			}
		}()
	}
	wg.Wait()
	list := exec(0, "", append([]string{"acl", "list"}, zk...)...)
	for op := range 2 {
		for i := range each {
			if line := fmt.Sprintf("allow u%d produce t%d\n", op, i); !strings.Contains(list, line) {
				t.Fatalf("grant %q lost:\n%s", line, list)
			}
		}
	}
	// import: a file's content replaces a znode's, even one that does not parse.
	dir := t.TempDir()
	exec(0, "pw\n", "user", "add", "dave", "--file", dir+"/users")
	os.WriteFile(dir+"/acls", []byte("allow dave consume logs\n"), 0o600)
	zk2 := []string{"--zk", s.Addr, "--zk-root", "/c2"}
	exec(0, "", append([]string{"acl", "add", "--user", "x", "--topic", "y", "--ops", "admin"}, zk2...)...)
	exec(2, "", "acl", "import", dir+"/acls") // no --zk
	if out := exec(0, "", append([]string{"user", "import", dir + "/users"}, zk2...)...); !strings.Contains(out, "1 users") {
		t.Fatalf("user import: %s", out)
	}
	exec(0, "", append([]string{"acl", "import", dir + "/acls"}, zk2...)...)
	if out := exec(0, "", append([]string{"user", "list"}, zk2...)...); !strings.HasPrefix(out, "dave\t") {
		t.Fatalf("imported users: %s", out)
	}
	if out := exec(0, "", append([]string{"acl", "list"}, zk2...)...); out != "allow dave consume logs\n" {
		t.Fatalf("imported grants: %s", out)
	}

	exec(0, "", append([]string{"acl", "remove", "--user", "u0", "--topic", "t0"}, zk...)...)
	exec(1, "", append([]string{"acl", "remove", "--user", "u0", "--topic", "t0"}, zk...)...)
	if out := exec(0, "", append([]string{"acl", "list", "--user", "u0"}, zk...)...); strings.Contains(out, " t0\n") || strings.Count(out, "\n") != each-1 {
		t.Fatalf("after the removal:\n%s", out)
	}
}
