package client

import (
	"errors"
	"strings"
	"testing"
	"time"

	"sluice/batch"
)

func TestConfigValidate(t *testing.T) {
	f := func(want string, opts ...Opt) {
		t.Helper()
		_, err := newCfg(opts)
		switch {
		case want == "" && err != nil:
			t.Fatalf("unexpected error %v", err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Fatalf("error %v, want %q", err, want)
		}
	}
	b := Brokers("127.0.0.1:1")
	f("", b)
	f("batch bytes", b, BatchBytes(10))
	f("batch bytes", b, BatchBytes(batch.MaxSize+1))
	f("unknown codec", b, Compression(9))
	f("max buffered", b, MaxBufferedBytes(1000))
	f("linger", b, Linger(-time.Second))
	f("max in flight", b, MaxInflight(0))
	f("max in flight", b, BatchBytes(2<<20), MaxRequestBytes(1<<20))
	f("max frame", b, MaxFrame(1<<20))
	f("fetch bytes", b, FetchMaxBytes(batch.MaxSize+1)) // an answer the consumer's frame limit would refuse
	f("", b, FetchMaxBytes(batch.MaxSize))
	f("logical range", b, LogicalRange(9, 8))
	f("backoff", b, RetryBackoff(time.Second, time.Millisecond))
	f("", b, Compression(batch.CodecZstd), LogicalRange(5, 5), Start(AtTime(time.Now())))
	f("", b, Auth("alice", "pw"))
	f("needs a password", b, Auth("alice", ""))
	f("without ','", b, Auth("a,b", "pw"))
	if _, err := newCfg(nil); !errors.Is(err, ErrNoBroker) {
		t.Fatalf("no broker: %v", err)
	}
}
