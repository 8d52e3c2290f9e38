package admin

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"sync"
	"testing"

	"github.com/go-zookeeper/zk"

	"sluice/internal/peer/zktest"
	"sluice/wire"
)

// TestExpanded: the new layout is appended to the history (a topic without one gets its
// current layout first), V goes up by one, and the count must rise to at most 65536.
func TestExpanded(t *testing.T) {
	ti := TopicInfo{Partitions: 2, Version: 1}
	got, err := Expanded(ti, 5)
	want := []Layout{{1, 2}, {2, 5}}
	if err != nil || got.Version != 2 || got.Partitions != 5 || !slices.Equal(got.History, want) {
		t.Fatalf("expanded %+v, %v", got, err)
	}
	got2, err := Expanded(got, 8)
	if err != nil || !slices.Equal(got2.History, append(want, Layout{3, 8})) || !slices.Equal(got.History, want) {
		t.Fatalf("expanded again %+v (first %+v), %v", got2, got, err)
	}
	for _, n := range []int{1, 2, wire.MaxPartitions + 1} {
		if _, err := Expanded(ti, n); !errors.Is(err, ErrNotMore) {
			t.Fatalf("to %d: %v", n, err)
		}
	}
}

// TestSwitchesDue: a partition switches at every later layout whose previous layout had
// it.
func TestSwitchesDue(t *testing.T) {
	ls := []Layout{{1, 2}, {2, 4}, {3, 8}}
	for id, want := range map[int][]uint32{0: {2, 3}, 1: {2, 3}, 2: {3}, 3: {3}, 4: nil, 7: nil} {
		if got := SwitchesDue(ls, id); !slices.Equal(got, want) {
			t.Errorf("partition %d: %v, want %v", id, got, want)
		}
	}
}

// TestParseTopic: a history that does not rise or does not end at the current layout is
// refused (a znode edited by hand), as is a partition count out of range.
func TestParseTopic(t *testing.T) {
	for _, bad := range []string{
		`{"partitions": 0, "version": 1}`,
		`{"partitions": 65537, "version": 1}`,
		`{"partitions": 4, "version": 2, "history": [{"version": 1, "partitions": 2}, {"version": 2, "partitions": 3}]}`,
		`{"partitions": 4, "version": 2, "history": [{"version": 1, "partitions": 4}, {"version": 2, "partitions": 4}]}`,
		`{"partitions": 4, "version": 2, "history": [{"version": 2, "partitions": 2}, {"version": 2, "partitions": 4}]}`,
		`not json`,
	} {
		if _, err := parseTopic([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	if _, err := parseTopic([]byte(`{"partitions": 4, "version": 2, "history": [{"version": 1, "partitions": 2}, {"version": 2, "partitions": 4}]}`)); err != nil {
		t.Fatal(err)
	}
}

// TestExpandTopic against ZooKeeper: bad counts and unknown topics are refused; of
// concurrent expansions one wins and the others get ErrTopicChanged or ErrNotMore; the
// next expansion waits until every old partition recorded its switch; a switch is
// recorded once and never changed; Layouts reports them.
func TestExpandTopic(t *testing.T) {
	s := zktest.Start(t)
	c := dial(t, s)
	if err := c.CreateTopic("t", TopicInfo{Partitions: 2, Version: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExpandTopic("nope", 4); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("unknown topic: %v", err)
	}
	for _, n := range []int{1, 2, wire.MaxPartitions + 1} {
		if _, err := c.ExpandTopic("t", n); !errors.Is(err, ErrNotMore) {
			t.Fatalf("to %d: %v", n, err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = dial(t, s).ExpandTopic("t", 4+i)
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, ErrTopicChanged) && !errors.Is(err, ErrNotMore):
			t.Fatalf("a losing expansion: %v", err)
		}
	}
	ti, _, err := c.Topic("t")
	if won != 1 || err != nil || ti.Version != 2 || len(ti.History) != 2 {
		t.Fatalf("%d expansions won (%v); topic %+v %v", won, errs, ti, err)
	}
	if _, err := c.ExpandTopic("t", 16); !errors.Is(err, ErrTopicChanged) {
		t.Fatalf("expansion before the switches: %v", err)
	}
	if got, err := c.RecordSwitch("t", 2, 0, 100); err != nil || got != 100 {
		t.Fatalf("record: %d %v", got, err)
	}
	if got, err := c.RecordSwitch("t", 2, 0, 200); err != nil || got != 100 {
		t.Fatalf("record again: %d %v", got, err)
	}
	// Switch znodes edited by hand under names that are not a partition's spelling are
	// left out, not taken for partition 1's.
	for _, name := range []string{"01", "+1"} {
		p := path.Join(path.Dir(c.switchPath("t", 2, 0)), name)
		if _, err := c.conn.Create(p, []byte(`{"offset":7}`), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	ls, err := c.Layouts("t")
	if err != nil || len(ls) != 2 || fmt.Sprint(ls[1].Switches) != "[100 -1]" {
		t.Fatalf("layouts %+v %v", ls, err)
	}
	if _, err := c.RecordSwitch("t", 2, 1, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExpandTopic("t", 16); err != nil {
		t.Fatalf("expansion after the switches: %v", err)
	}
	ls, err = c.Layouts("t")
	if err != nil || len(ls) != 3 || ls[2].Partitions != 16 || len(ls[2].Switches) != ti.Partitions ||
		fmt.Sprint(ls[1].Switches) != "[100 0]" {
		t.Fatalf("layouts after the second expansion %+v %v", ls, err)
	}
}

// TestExpandWaitsForRealSwitches: a switch znode edited by hand, under a name that is not a
// partition's spelling or with content that is not a switch, does not count as a
// partition's switch: the next expansion still waits for partition 1, as Layouts says.
func TestExpandWaitsForRealSwitches(t *testing.T) {
	s := zktest.Start(t)
	c := dial(t, s)
	for i, junk := range []struct{ name, data string }{{"01", `{"offset":7}`}, {"1", `{}`}, {"+1", `{"offset":7}`}} {
		topic := fmt.Sprintf("t%d", i)
		if err := c.CreateTopic(topic, TopicInfo{Partitions: 2, Version: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ExpandTopic(topic, 4); err != nil {
			t.Fatal(err)
		}
		if _, err := c.RecordSwitch(topic, 2, 0, 100); err != nil {
			t.Fatal(err)
		}
		p := path.Join(path.Dir(c.switchPath(topic, 2, 0)), junk.name)
		if _, err := c.conn.Create(p, []byte(junk.data), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		if ls, err := c.Layouts(topic); err != nil || fmt.Sprint(ls[1].Switches) != "[100 -1]" {
			t.Fatalf("%s=%s: layouts %+v %v", junk.name, junk.data, ls, err)
		}
		if _, err := c.ExpandTopic(topic, 8); !errors.Is(err, ErrTopicChanged) {
			t.Fatalf("%s=%s: an expansion before partition 1 switched: %v", junk.name, junk.data, err)
		}
	}
}
