package admin

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sluice/internal/peer/zktest"
)

// appendLine is an edit that adds a line to the content.
func appendLine(line string) func([]byte, bool) ([]byte, error) {
	return func(old []byte, _ bool) ([]byte, error) {
		return append(slices.Clip(old), line+"\n"...), nil
	}
}

// TestEditSecurityCAS: the first edit creates the znode; an edit whose read is
// overtaken by another editor's write runs again on the newer content (both land); many
// editors at once all land; a watch left by ReadSecurity fires at the next change.
func TestEditSecurityCAS(t *testing.T) {
	s := zktest.Start(t)
	a, b := dial(t, s), dial(t, s)
	data, ok, st, _, err := a.ReadSecurity(ACLsZnode)
	if err != nil || ok || data != nil || st != (Stamp{}) {
		t.Fatalf("missing znode: %q %v %v %v", data, ok, st, err)
	}
	if err := a.EditSecurity(ACLsZnode, func(old []byte, exists bool) ([]byte, error) {
		if exists || old != nil {
			t.Errorf("first edit saw exists=%v %q", exists, old)
		}
		return []byte("first\n"), nil
	}); err != nil {
		t.Fatal(err)
	}
	_, _, st, watch, err := a.ReadSecurity(ACLsZnode)
	if err != nil || st == (Stamp{}) {
		t.Fatalf("after the first edit: %v %v", st, err)
	}

	// a reads, b writes, a's write conflicts and a edits again on b's content.
	runs := 0
	err = a.EditSecurity(ACLsZnode, func(old []byte, exists bool) ([]byte, error) {
		runs++
		if runs == 1 {
			if err := b.EditSecurity(ACLsZnode, appendLine("from b")); err != nil {
				t.Error(err)
			}
		}
		return appendLine("from a")(old, exists)
	})
	if err != nil || runs != 2 {
		t.Fatalf("edit over a conflict: %v after %d runs, want 2", err, runs)
	}
	select {
	case <-watch:
	case <-time.After(30 * time.Second):
		t.Fatal("the watch did not fire at a change")
	}

	// Concurrent editors, each on its own session.
	const editors, each = 4, 5
	var wg sync.WaitGroup
	for e := range editors {
		c := dial(t, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := c.EditSecurity(ACLsZnode, appendLine(fmt.Sprintf("e%d-%d", e, i))); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	data, _, st2, _, err := a.ReadSecurity(ACLsZnode)
	if err != nil || st2 == st {
		t.Fatalf("final read: %v, stamp %v", err, st2)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 3+editors*each {
		t.Fatalf("%d lines, want %d: an edit was lost\n%s", len(lines), 3+editors*each, data)
	}
	for e := range editors {
		for i := range each {
			if !slices.Contains(lines, fmt.Sprintf("e%d-%d", e, i)) {
				t.Fatalf("e%d-%d lost", e, i)
			}
		}
	}
	if st3, err := a.StatSecurity(ACLsZnode); err != nil || st3 != st2 {
		t.Fatalf("StatSecurity %v %v, want %v", st3, err, st2)
	}

	// An edit's error writes nothing; content over ZooKeeper's limit is refused.
	if err := a.EditSecurity(ACLsZnode, func([]byte, bool) ([]byte, error) { return nil, fmt.Errorf("no") }); err == nil {
		t.Fatal("an edit's error was not returned")
	}
	big := make([]byte, maxSecurityData+1)
	if err := a.EditSecurity(ACLsZnode, func([]byte, bool) ([]byte, error) { return big, nil }); err == nil {
		t.Fatal("content over the limit was written")
	}
	if st4, _ := a.StatSecurity(ACLsZnode); st4 != st2 {
		t.Fatal("a refused edit changed the znode")
	}
}
