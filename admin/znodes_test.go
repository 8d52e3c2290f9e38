package admin

import (
	"math"
	"testing"
)

// TestParseOwner: an assignment znode is taken only as the leader writes it, a broker
// that may register, an epoch from 1 and an optional from like the broker; anything
// else (edited by hand) is refused, to be handled as unreadable.
func TestParseOwner(t *testing.T) {
	f := func(in string, want Owner, ok bool) {
		t.Helper()
		got, err := parseOwner([]byte(in))
		if (err == nil) != ok || got != want {
			t.Errorf("parseOwner(%s) = %+v, %v; want %+v, ok %v", in, got, err, want, ok)
		}
	}
	f(`{"broker":"b1","epoch":1}`, Owner{Broker: "b1", Epoch: 1}, true)
	f(`{"broker":"b2","epoch":7,"from":"b1"}`, Owner{Broker: "b2", Epoch: 7, From: "b1"}, true)
	f(`{"broker":"b1","epoch":7,"from":"b1"}`, Owner{Broker: "b1", Epoch: 7, From: "b1"}, true) // moved back before b1 released it
	f(`{"broker":"127.0.0.1:9440","epoch":18446744073709551615,"unknown":[1]}`, Owner{Broker: "127.0.0.1:9440", Epoch: math.MaxUint64}, true)
	for _, junk := range []string{
		``, `not json`, `null`, `[]`, `{}`, `{"epoch": 9}`, `{"broker": "", "epoch": 1}`, `{"broker": "b1"}`,
		`{"broker": "b1", "epoch": 0}`, `{"broker": "b1", "epoch": -1}`, `{"broker": "b1", "epoch": 1.5}`,
		`{"broker": "b1", "epoch": 18446744073709551616}`, `{"broker": "a/b", "epoch": 1}`,
		`{"broker": "b1", "epoch": 1, "from": "x/y"}`, `{"broker": 1, "epoch": 1}`, `{"broker": "b1", "epoch": "1"}`,
	} {
		f(junk, Owner{}, false)
	}
}

// TestParseRelease: a release znode is taken only as a broker writes it, under an id
// that may register, at an epoch from 1, with an hdfs_next not below 0 (0 or absent:
// not known); anything else is refused, to be handled as no release.
func TestParseRelease(t *testing.T) {
	f := func(in string, want Release, ok bool) {
		t.Helper()
		got, err := parseRelease([]byte(in))
		if (err == nil) != ok || got != want {
			t.Errorf("parseRelease(%s) = %+v, %v; want %+v, ok %v", in, got, err, want, ok)
		}
	}
	f(`{"broker":"b1","epoch":3}`, Release{Broker: "b1", Epoch: 3}, true)
	f(`{"broker":"b1","epoch":3,"hdfs_next":0}`, Release{Broker: "b1", Epoch: 3}, true)
	f(`{"broker":"b1","epoch":3,"hdfs_next":4096}`, Release{Broker: "b1", Epoch: 3, HDFSNext: 4096}, true)
	for _, junk := range []string{
		``, `not json`, `null`, `[]`, `{}`, `{"epoch": 3}`, `{"broker": "b1"}`, `{"broker": "b1", "epoch": 0}`,
		`{"broker": "a/b", "epoch": 1}`, `{"broker": "b1", "epoch": 1, "hdfs_next": -1}`,
		`{"broker": "b1", "epoch": 1, "hdfs_next": 9223372036854775808}`, `{"broker": "b1", "epoch": 1, "hdfs_next": 1.5}`,
		`{"broker": "b1", "epoch": -1}`,
	} {
		f(junk, Release{}, false)
	}
}

// TestParseGeneration: the assignments' generation is taken from an object with a
// generation from 0 to the largest uint64; anything else (the empty content the znode
// is created with, junk) is refused with generation 0, from which bumpGeneration
// starts again.
func TestParseGeneration(t *testing.T) {
	f := func(in string, want uint64, ok bool) {
		t.Helper()
		got, err := parseGeneration([]byte(in))
		if (err == nil) != ok || got.N != want {
			t.Errorf("parseGeneration(%s) = %+v, %v; want %d, ok %v", in, got, err, want, ok)
		}
	}
	f(`{"generation":0}`, 0, true)
	f(`{"generation":99}`, 99, true)
	f(`{"generation":18446744073709551615}`, math.MaxUint64, true)
	for _, junk := range []string{
		``, `not json`, `null`, `[]`, `{}`, `{"generation": null}`, `{"generation": -1}`, `{"generation": 1.5}`,
		`{"generation": 18446744073709551616}`, `{"generation": "7"}`, `{"generation": 7, "generation": null}`, `{"gen": 7}`,
	} {
		f(junk, 0, false)
	}
}
