package broker

import "testing"

// TestSpaceStateBySource: the disk is full while either source says so; an append that
// still fits does not end what the persister began (the flip-flop that logged "disk
// full" twice and "space is back" between, while the persister had no room).
func TestSpaceStateBySource(t *testing.T) {
	var s spaceState
	steps := []struct {
		src          int
		full         bool
		began, ended bool
	}{
		{fromPersist, true, true, false},  // the persister cannot get the next file
		{fromAppend, false, false, false}, // an append fits in the reserved space: still full
		{fromAppend, true, false, false},  // then appends are refused too
		{fromPersist, false, false, false},
		{fromAppend, false, false, true}, // both have room: back
		{fromAppend, false, false, false},
	}
	for i, st := range steps {
		began, ended := s.set(st.src, st.full)
		if began != st.began || ended != st.ended {
			t.Fatalf("step %d (%+v): began %v ended %v", i, st, began, ended)
		}
	}
}
