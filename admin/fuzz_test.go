package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"sluice/internal/peer/zktest"
	"sluice/wire"
)

// The cluster state in ZooKeeper is read by every broker and admin, and any of its znodes
// can be edited by hand (zkCli.sh): the decoders here take arbitrary bytes.

// FuzzParseRegistration decodes a broker's registration znode (ROOT/brokers/ID) of
// arbitrary content. It checks: no panic; what parseRegistration accepts has the id it
// was given, an address, a finite capacity not below zero and none of the fields that
// never come from the znode (Since, Unreadable); and it re-encodes (keep's json.Marshal,
// what Register writes) to a registration that decodes equal.
func FuzzParseRegistration(f *testing.F) {
	for _, b := range []BrokerInfo{
		{Addr: "127.0.0.1:9440", Capacity: 1},
		{Addr: "10.0.0.7:9440", Capacity: 2.5, Load: 1 << 20, Partitions: map[string]PartLoad{
			LoadKey(PartitionID{"orders", 0}): {BytesPerSec: 1024, HDFSLag: 0.25, Epoch: 7},
			LoadKey(PartitionID{"orders", 3}): {},
		}},
	} {
		data, err := json.Marshal(b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add("b1", data)
	}
	for _, junk := range []string{
		`{not json`, `null`, `[]`, `{}`, `{"addr": ""}`, `{"addr": "a:1", "capacity": -1}`,
		`{"addr": "a:1", "capacity": 1e999}`, `{"addr": "a:1", "partitions": {"t/0": 5}}`,
	} {
		f.Add("b2", []byte(junk))
	}
	f.Fuzz(func(t *testing.T, id string, data []byte) {
		b, err := parseRegistration(id, data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("refused with an empty error")
			}
			return
		}
		if b.ID != id || b.Addr == "" || !(b.Capacity >= 0) || math.IsInf(b.Capacity, 0) || b.Since != 0 || b.Unreadable {
			t.Fatalf("accepted an invalid registration %+v from %q", b, data)
		}
		out, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("cannot re-encode %+v: %v", b, err)
		}
		b2, err := parseRegistration(id, out)
		if err != nil {
			t.Fatalf("re-encoded registration %s refused: %v", out, err)
		}
		if !sameRegistration(b, b2) {
			t.Fatalf("registration changed through a re-encoding: %+v, then %+v", b, b2)
		}
	})
}

// sameRegistration compares registrations, an empty partition map equal to none (the
// encoding omits both).
func sameRegistration(a, b BrokerInfo) bool {
	if len(a.Partitions) != len(b.Partitions) {
		return false
	}
	for k, v := range a.Partitions {
		if w, ok := b.Partitions[k]; !ok || v != w {
			return false
		}
	}
	return a.ID == b.ID && a.Addr == b.Addr && a.Capacity == b.Capacity && a.Load == b.Load &&
		a.Since == b.Since && a.Unreadable == b.Unreadable
}

// FuzzParseTopic decodes a topic's znode (ROOT/topics/NAME) of arbitrary content. It
// checks: no panic; what parseTopic accepts has 1 to 65536 partitions and layouts, oldest
// first, whose versions and partition counts rise, each count in that range, the last
// one the current; SwitchesDue answers for each partition; the topic re-encodes
// (json.Marshal, what CreateTopic and ExpandTopic write) to a znode that decodes equal;
// and its expansion by one partition (what ExpandTopic writes) decodes too.
func FuzzParseTopic(f *testing.F) {
	opts := wire.TopicOptions{RetentionMs: -1, RetentionBytes: 1 << 30, SegmentBytes: 64 << 20, SegmentMs: 3_600_000}
	one := TopicInfo{Partitions: 4, Version: 1, Options: opts}
	two, err := Expanded(one, 6)
	if err != nil {
		f.Fatal(err)
	}
	three, err := Expanded(two, 9)
	if err != nil {
		f.Fatal(err)
	}
	for _, ti := range []TopicInfo{one, two, three, {Partitions: wire.MaxPartitions, Version: 1}} {
		data, err := json.Marshal(ti)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, junk := range []string{
		`not json`, `null`, `{}`, `{"partitions": 0, "version": 1}`, `{"partitions": 65537, "version": 1}`,
		`{"partitions": 4, "version": 2, "history": [{"version": 1, "partitions": 2}, {"version": 2, "partitions": 3}]}`,
		`{"partitions": 4, "version": 2, "history": [{"version": 2, "partitions": 2}, {"version": 2, "partitions": 4}]}`,
		`{"partitions": 4, "version": 2, "history": []}`,
	} {
		f.Add([]byte(junk))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ti, err := parseTopic(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "unreadable topic znode: ") {
				t.Fatalf("refused with an unclear error: %v", err)
			}
			return
		}
		checkTopic(t, "accepted", ti)
		for id := range min(ti.Partitions, 64) {
			due := SwitchesDue(ti.Layouts(), id)
			if !slices.IsSorted(due) || len(due) >= len(ti.Layouts()) {
				t.Fatalf("partition %d of %+v switches at %v", id, ti, due)
			}
		}
		out, err := json.Marshal(ti)
		if err != nil {
			t.Fatalf("cannot re-encode %+v: %v", ti, err)
		}
		ti2, err := parseTopic(out)
		if err != nil {
			t.Fatalf("re-encoded topic %s refused: %v", out, err)
		}
		if !sameTopic(ti, ti2) {
			t.Fatalf("topic changed through a re-encoding: %+v, then %+v", ti, ti2)
		}
		if ti.Partitions == wire.MaxPartitions {
			return
		}
		next, err := Expanded(ti, ti.Partitions+1)
		if ti.Version == math.MaxUint32 { // no version is left to give the expansion
			if err == nil {
				t.Fatalf("%+v expanded to version %d", ti, next.Version)
			}
			return
		}
		if err != nil {
			t.Fatalf("cannot expand %+v by one partition: %v", ti, err)
		}
		out, _ = json.Marshal(next)
		if _, err := parseTopic(out); err != nil {
			t.Fatalf("the expansion of %s writes %s, which is refused: %v", data, out, err)
		}
		checkTopic(t, "expanded", next)
	})
}

// checkTopic fails t unless ti is a topic parseTopic may return.
func checkTopic(t *testing.T, what string, ti TopicInfo) {
	t.Helper()
	if ti.Partitions < 1 || ti.Partitions > wire.MaxPartitions {
		t.Fatalf("%s a topic of %d partitions: %+v", what, ti.Partitions, ti)
	}
	ls := ti.Layouts()
	if len(ls) == 0 || ls[len(ls)-1] != (Layout{Version: ti.Version, Partitions: ti.Partitions}) {
		t.Fatalf("%s a topic whose layouts %+v do not end at its version %d and %d partitions", what, ls, ti.Version, ti.Partitions)
	}
	for k, l := range ls {
		if l.Partitions < 1 || l.Partitions > wire.MaxPartitions {
			t.Fatalf("%s a topic whose layout %d has %d partitions: %+v", what, k, l.Partitions, ti)
		}
		if k > 0 && (l.Version <= ls[k-1].Version || l.Partitions <= ls[k-1].Partitions) {
			t.Fatalf("%s a topic whose layout %d (%+v) does not follow %+v", what, k, l, ls[k-1])
		}
	}
}

// sameTopic compares topics, an empty history equal to none (the encoding omits both).
func sameTopic(a, b TopicInfo) bool {
	return a.Partitions == b.Partitions && a.Version == b.Version && a.Options == b.Options &&
		slices.Equal(a.History, b.History)
}

// FuzzParseDigest parses arbitrary zk.auth contents. It checks: no panic; what
// ParseDigest accepts is a non-empty user without ':' and a non-empty password, both of
// the first line, which starts with "user:password"; and that credential written as a
// zk.auth line parses back equal (unless its password ends in '\r': the line's own CR
// would then be taken for the line end, "u:p\r\r\n").
func FuzzParseDigest(f *testing.F) {
	for _, s := range []string{
		"sluice:zk-s3cret\n", "sluice:zk-s3cret", "sluice:zk-s3cret\r\n", "user:pa:ss\nsecond:line\n",
		"", "\n", ":password\n", "user:\n", "no colon\n", "\nuser:password\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDigest(s)
		if err != nil {
			if d != (Digest{}) {
				t.Fatalf("refused %q but returned %+v", s, d)
			}
			return
		}
		if d.User == "" || d.Password == "" || strings.ContainsAny(d.User, ":\n") || strings.Contains(d.Password, "\n") {
			t.Fatalf("accepted an invalid credential %+v from %q", d, s)
		}
		if !strings.HasPrefix(s, d.User+":"+d.Password) {
			t.Fatalf("credential %+v is not the first line of %q", d, s)
		}
		if strings.HasSuffix(d.Password, "\r") {
			return
		}
		if d2, err := ParseDigest(d.User + ":" + d.Password + "\n"); err != nil || d2 != d {
			t.Fatalf("credential %+v written as a line parses as %+v (%v)", d, d2, err)
		}
	})
}

// FuzzParseLoadKey parses arbitrary keys of a registration's partition figures
// (BrokerInfo.Partitions) and encodes arbitrary partition ids with LoadKey. It checks:
// no panic; a key ParseLoadKey takes is TOPIC/ID for a non-empty topic and the id it
// returns, and the key LoadKey makes of that id parses back to it (so "t/01" and "t/+1"
// are refused, not aliases); LoadKey's key of any id ≥ 0 with a non-empty topic parses
// back to that id, and of a negative id is refused.
func FuzzParseLoadKey(f *testing.F) {
	for _, pid := range []PartitionID{{"orders", 0}, {"orders", 65535}, {"a/b", 3}} {
		f.Add(LoadKey(pid), pid.Topic, pid.ID)
	}
	for _, k := range []string{"", "/", "/0", "orders/", "orders", "orders/x", "orders/99999999999999999999", "orders/-1", "orders/+1", "orders/01"} {
		f.Add(k, "t", 1)
	}
	f.Fuzz(func(t *testing.T, k, topic string, id int) {
		if p := ParseLoadKey(k); p != (PartitionID{}) {
			if p.Topic == "" || !strings.HasPrefix(k, p.Topic+"/") {
				t.Fatalf("key %q parsed as %+v", k, p)
			}
			if q := ParseLoadKey(LoadKey(p)); q != p {
				t.Fatalf("key %q parsed as %+v, whose key %q parses as %+v", k, p, LoadKey(p), q)
			}
		}
		if topic == "" {
			return
		}
		pid := PartitionID{Topic: topic, ID: id}
		if id < 0 { // no partition has a negative id
			if got := ParseLoadKey(LoadKey(pid)); got != (PartitionID{}) {
				t.Fatalf("LoadKey(%+v) = %q parses as %+v", pid, LoadKey(pid), got)
			}
			return
		}
		if got := ParseLoadKey(LoadKey(pid)); got != pid {
			t.Fatalf("LoadKey(%+v) = %q parses as %+v", pid, LoadKey(pid), got)
		}
	})
}

// FuzzReadSwitch writes arbitrary content into a switch znode
// (ROOT/topics/TOPIC/switch/V/PARTITION) of a real ZooKeeper, one server for the whole
// run, and reads it through readSwitch, then records a switch over it. It checks: no
// panic and no error from a readable ZooKeeper; readSwitch takes the content only when it
// is a Switch with an offset not below zero, and returns that offset; RecordSwitch then
// answers that offset, or an error for content readSwitch does not take, and never
// changes the znode (a recorded switch is never changed); and an offset readSwitch
// returns, recorded anew by RecordSwitch, reads back the same.
func FuzzReadSwitch(f *testing.F) {
	for _, off := range []int64{0, 1, 4096, math.MaxInt64} {
		data, err := json.Marshal(Switch{Offset: off})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, junk := range []string{``, `not json`, `{}`, `null`, `{"offset": null}`, `{"offset": -1}`, `{"offset": 1.5}`, `{"offset": "7"}`, `[]`, `{"offset": 9223372036854775808}`} {
		f.Add([]byte(junk))
	}
	s := zktest.Start(f)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A long session: each fuzzing worker runs its own server, and on a loaded host a
	// 2 s session could expire between two inputs and fail one that is fine.
	c, err := Dial(ctx, []string{s.Addr}, "/sluice", 30*time.Second, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(c.Close)
	const topic, version, id = "orders", 2, 0
	p := c.switchPath(topic, version, id)
	if err := c.ensure(p); err != nil {
		f.Fatal(err)
	}
	fresh := 0 // partitions used for fresh records, one per run of the body
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 512<<10 {
			t.Skipf("%d bytes: more than a znode holds", len(data)) // jute.maxbuffer, 1 MiB
		}
		if _, err := c.conn.Set(p, data, -1); err != nil {
			t.Fatal(err)
		}
		off, ok, err := c.readSwitch(p)
		if err != nil {
			t.Fatal(err)
		}
		var want struct{ Offset *int64 } // the offset must be there: {} is no switch at 0
		jerr := json.Unmarshal(data, &want)
		if ok != (jerr == nil && want.Offset != nil && *want.Offset >= 0) || ok && (off != *want.Offset || off < 0) {
			t.Fatalf("switch znode %q read as offset %d, ok %v (it decodes to %v, %v)", data, off, ok, want.Offset, jerr)
		}
		got, err := c.RecordSwitch(topic, version, id, 12345)
		if ok && (err != nil || got != off) || !ok && err == nil {
			t.Fatalf("switch znode %q (read as %d, %v): RecordSwitch answers %d, %v", data, off, ok, got, err)
		}
		after, _, err := c.conn.Get(p)
		if err != nil || !bytes.Equal(after, data) {
			t.Fatalf("RecordSwitch changed the recorded switch %q to %q (%v)", data, after, err)
		}
		if !ok {
			return
		}
		fresh++
		if got, err := c.RecordSwitch(topic, version, id+fresh, off); err != nil || got != off {
			t.Fatalf("recording offset %d answers %d, %v", off, got, err)
		}
		if got, ok, err := c.readSwitch(c.switchPath(topic, version, id+fresh)); err != nil || !ok || got != off {
			t.Fatalf("offset %d recorded reads back as %d, %v, %v", off, got, ok, err)
		}
	})
}

// FuzzParseOwner decodes a partition's assignment znode (ROOT/assignments/TOPIC/ID) of
// arbitrary content. It checks: no panic; a refusal is an error that says what was
// unreadable, with no assignment; what parseOwner accepts names a broker and a from (if
// any) that a broker may register under (not empty, no '/'), an epoch not 0, and is
// exactly what json.Unmarshal makes of the znode; json.Unmarshal's valid assignments
// are all accepted; an accepted one re-encodes (json.Marshal, what setOwner writes) to
// a znode that decodes equal; and the leader's next move of it (epoch + 1) decodes too.
func FuzzParseOwner(f *testing.F) {
	for _, o := range []Owner{
		{Broker: "b1", Epoch: 1},
		{Broker: "b2", Epoch: 7, From: "b1"},
		{Broker: "127.0.0.1:9440", Epoch: 3, From: "127.0.0.1:9441"},
		{Broker: "b1", Epoch: math.MaxUint64 - 1, From: "b1"},
	} {
		data, err := json.Marshal(o)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, junk := range []string{
		``, `not json`, `null`, `[]`, `{}`, `{"epoch": 9}`, `{"broker": "", "epoch": 1}`, `{"broker": "b1"}`,
		`{"broker": "b1", "epoch": 0}`, `{"broker": "b1", "epoch": -1}`, `{"broker": "b1", "epoch": 1.5}`,
		`{"broker": "b1", "epoch": 18446744073709551616}`, `{"broker": "a/b", "epoch": 1}`,
		`{"broker": "b1", "epoch": 1, "from": "x/y"}`, `{"broker": 1, "epoch": 1}`, `{"broker": "b1", "epoch": "1"}`,
		`{"Broker": "b1", "EPOCH": 2}`, `{"broker": "b\u00e9\ud800", "epoch": 1}`,
	} {
		f.Add([]byte(junk))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := parseOwner(data)
		var want Owner
		jerr := json.Unmarshal(data, &want)
		valid := jerr == nil && want.Broker != "" && !strings.Contains(want.Broker, "/") && want.Epoch > 0 &&
			!strings.Contains(want.From, "/")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "unreadable assignment znode: ") || o != (Owner{}) {
				t.Fatalf("refused %q with %+v and an unclear error: %v", data, o, err)
			}
			if valid {
				t.Fatalf("refused %q, a valid assignment %+v: %v", data, want, err)
			}
			return
		}
		if !valid || o != want {
			t.Fatalf("accepted %q as %+v; json.Unmarshal makes %+v of it (%v)", data, o, want, jerr)
		}
		out, err := json.Marshal(o)
		if err != nil {
			t.Fatalf("cannot re-encode %+v: %v", o, err)
		}
		if o2, err := parseOwner(out); err != nil || o2 != o {
			t.Fatalf("assignment %+v re-encoded as %s decodes as %+v, %v", o, out, o2, err)
		}
		if o.Epoch == math.MaxUint64 { // no epoch is left for a move
			return
		}
		next := Owner{Broker: o.Broker, Epoch: o.Epoch + 1, From: o.Broker}
		out, _ = json.Marshal(next)
		if o2, err := parseOwner(out); err != nil || o2 != next {
			t.Fatalf("the move of %+v writes %s, which decodes as %+v, %v", o, out, o2, err)
		}
	})
}

// FuzzParseRelease decodes a partition's release znode (ROOT/released/TOPIC/ID) of
// arbitrary content. It checks: no panic; a refusal is an error that says what was
// unreadable, with no release; what parseRelease accepts names a broker that may
// register (not empty, no '/'), an epoch not 0 and an hdfs_next not below 0, and is
// exactly what json.Unmarshal makes of the znode; json.Unmarshal's valid releases are
// all accepted; and an accepted one re-encodes (json.Marshal, what Release writes) to a
// znode that decodes equal.
func FuzzParseRelease(f *testing.F) {
	for _, r := range []Release{
		{Broker: "b1", Epoch: 1},
		{Broker: "b1", Epoch: 7, HDFSNext: 4096},
		{Broker: "127.0.0.1:9440", Epoch: math.MaxUint64, HDFSNext: math.MaxInt64},
	} {
		data, err := json.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, junk := range []string{
		``, `not json`, `null`, `[]`, `{}`, `{"epoch": 3}`, `{"broker": "b1"}`, `{"broker": "b1", "epoch": 0}`,
		`{"broker": "a/b", "epoch": 1}`, `{"broker": "b1", "epoch": 1, "hdfs_next": -1}`,
		`{"broker": "b1", "epoch": 1, "hdfs_next": 9223372036854775808}`, `{"broker": "b1", "epoch": 1, "hdfs_next": 1e3}`,
		`{"broker": "b1", "epoch": -1}`, `{"broker": "b1", "epoch": 1, "hdfs_next": null}`,
	} {
		f.Add([]byte(junk))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := parseRelease(data)
		var want Release
		jerr := json.Unmarshal(data, &want)
		valid := jerr == nil && want.Broker != "" && !strings.Contains(want.Broker, "/") && want.Epoch > 0 && want.HDFSNext >= 0
		if err != nil {
			if !strings.HasPrefix(err.Error(), "unreadable release znode: ") || r != (Release{}) {
				t.Fatalf("refused %q with %+v and an unclear error: %v", data, r, err)
			}
			if valid {
				t.Fatalf("refused %q, a valid release %+v: %v", data, want, err)
			}
			return
		}
		if !valid || r != want {
			t.Fatalf("accepted %q as %+v; json.Unmarshal makes %+v of it (%v)", data, r, want, jerr)
		}
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("cannot re-encode %+v: %v", r, err)
		}
		if r2, err := parseRelease(out); err != nil || r2 != r {
			t.Fatalf("release %+v re-encoded as %s decodes as %+v, %v", r, out, r2, err)
		}
	})
}

// FuzzParseGeneration decodes ROOT/assignments' content (the generation) of arbitrary
// content. It checks: no panic; a refusal is an error that says what was unreadable,
// with generation 0 (what bumpGeneration starts again from); what parseGeneration
// accepts is what json.Unmarshal makes of the content, which has a generation field;
// content json.Unmarshal refuses is refused; an accepted generation re-encodes
// (json.Marshal, what bumpGeneration writes) to content that decodes equal, and so does
// the next one, which bumpGeneration writes.
func FuzzParseGeneration(f *testing.F) {
	for _, n := range []uint64{0, 1, 99, math.MaxUint64} {
		data, err := json.Marshal(Generation{N: n})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, junk := range []string{
		``, `not json`, `null`, `[]`, `{}`, `{"generation": null}`, `{"generation": -1}`, `{"generation": 1.5}`,
		`{"generation": 18446744073709551616}`, `{"generation": "7"}`, `{"generation": 7, "generation": null}`,
		`{"GENERATION": 7}`, `{"gen": 7}`,
	} {
		f.Add([]byte(junk))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := parseGeneration(data)
		var want Generation
		jerr := json.Unmarshal(data, &want)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "unreadable generation znode: ") || g != (Generation{}) {
				t.Fatalf("refused %q with %+v and an unclear error: %v", data, g, err)
			}
			return
		}
		if jerr != nil || g != want {
			t.Fatalf("accepted %q as %+v; json.Unmarshal makes %+v of it (%v)", data, g, want, jerr)
		}
		var fields map[string]json.RawMessage // json.Unmarshal matches keys in any case
		has := false
		if json.Unmarshal(data, &fields) == nil {
			for k, v := range fields {
				has = has || strings.EqualFold(k, "generation") && string(v) != "null"
			}
		}
		if !has {
			t.Fatalf("accepted %q, which has no generation", data)
		}
		for _, n := range []uint64{g.N, g.N + 1} {
			out, err := json.Marshal(Generation{N: n})
			if err != nil {
				t.Fatalf("cannot encode generation %d: %v", n, err)
			}
			if g2, err := parseGeneration(out); err != nil || g2.N != n {
				t.Fatalf("generation %d encoded as %s decodes as %+v, %v", n, out, g2, err)
			}
		}
	})
}
