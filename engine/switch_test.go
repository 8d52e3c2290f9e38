package engine

import (
	"errors"
	"testing"

	"sluice/persist/local"
)

// TestSwitch: Freeze fixes the switch offset and refuses appends (duplicates are still
// acknowledged); Switch raises V and appends of the new version go on from the switch
// offset; the old version is refused for new batches.
func TestSwitch(t *testing.T) {
	a := newArena(t, 8<<20, 64<<10)
	p := openPartition(t, t.TempDir(), a, local.Options{}, 1)
	defer p.Close()
	if _, err := p.Produce(1, 1, mkBatch(9, 0, 3, 10), testNow); err != nil {
		t.Fatal(err)
	}
	at := p.Freeze()
	if at != 3 {
		t.Fatalf("switch offset %d, want 3", at)
	}
	if _, err := p.Produce(1, 1, mkBatch(9, 3, 1, 10), testNow); !errors.Is(err, ErrSwitching) {
		t.Fatalf("append while frozen: %v", err)
	}
	if res, err := p.Produce(1, 1, mkBatch(9, 0, 3, 10), testNow); err != nil || res.Duplicates != 1 || res.Base != 0 {
		t.Fatalf("resend while frozen: %+v %v", res, err)
	}
	p.Switch(2, 0)
	if v := p.Version(); v != 2 {
		t.Fatalf("version %d after Switch(2)", v)
	}
	if _, err := p.Produce(1, 1, mkBatch(9, 3, 1, 10), testNow); !errors.Is(err, ErrVersionMismatch) {
		t.Fatalf("new batch of the old version: %v", err)
	}
	if res, err := p.Produce(2, 1, mkBatch(9, 3, 1, 10), testNow); err != nil || res.Base != at {
		t.Fatalf("first append of the new version: %+v %v", res, err)
	}
}

// TestThaw: a Freeze undone lets appends of the same version go on.
func TestThaw(t *testing.T) {
	a := newArena(t, 8<<20, 64<<10)
	p := openPartition(t, t.TempDir(), a, local.Options{}, 1)
	defer p.Close()
	p.Freeze()
	p.Thaw()
	if res, err := p.Produce(1, 1, mkBatch(9, 0, 1, 10), testNow); err != nil || res.Base != 0 {
		t.Fatalf("append after Thaw: %+v %v", res, err)
	}
}

// TestDrain: batches of an older version are acknowledged when the partition holds them
// (recent ones with their offsets, older ones without) and refused with version_mismatch
// otherwise, appending nothing either way.
func TestDrain(t *testing.T) {
	a := newArena(t, 8<<20, 64<<10)
	p := openPartition(t, t.TempDir(), a, local.Options{}, 1)
	defer p.Close()
	for seq := int32(0); seq < 30; seq += 3 {
		if _, err := p.Produce(1, 1, mkBatch(9, seq, 3, 10), testNow); err != nil {
			t.Fatal(err)
		}
	}
	p.Freeze()
	p.Switch(2, 0)
	f := func(name string, batches []byte, wantErr error, base, last int64) {
		t.Helper()
		res, err := p.Produce(1, 12345, batches, testNow)
		if !errors.Is(err, wantErr) || (err == nil && (res.Base != base || res.Last != last)) {
			t.Fatalf("%s: %+v %v", name, res, err)
		}
		var we *WindowError
		if wantErr != nil && (!errors.As(err, &we) || we.Version != 2) {
			t.Fatalf("%s: refusal without the new version: %v", name, err)
		}
		if next := p.Window().Next; next != 30 {
			t.Fatalf("%s: appended (next %d)", name, next)
		}
	}
	f("recent", mkBatch(9, 27, 3, 10), nil, 27, 29)
	f("two recent", append(mkBatch(9, 24, 3, 10), mkBatch(9, 27, 3, 10)...), nil, 24, 29)
	f("older than the window", mkBatch(9, 0, 3, 10), nil, -1, -1)
	f("not held", mkBatch(9, 30, 3, 10), ErrVersionMismatch, 0, 0)
	f("held then not", append(mkBatch(9, 27, 3, 10), mkBatch(9, 30, 3, 10)...), ErrVersionMismatch, 0, 0)
	f("unknown producer", mkBatch(8, 0, 3, 10), ErrVersionMismatch, 0, 0)
	f("not idempotent", mkBatch(0, 0, 1, 10), ErrVersionMismatch, 0, 0)
	if _, err := p.Produce(1, 0, []byte("junk"), testNow); !errors.Is(err, ErrInvalidBatch) {
		t.Fatalf("junk: %v", err)
	}
	// An empty produce of the old version is a plain mismatch.
	if _, err := p.Produce(1, 0, nil, testNow); !errors.Is(err, ErrVersionMismatch) {
		t.Fatalf("empty: %v", err)
	}
}
