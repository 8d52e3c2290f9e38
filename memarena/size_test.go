package memarena

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	f := func(in string, want int64) {
		t.Helper()
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	f("0", 0)
	f("4096", 4096)
	f("4096B", 4096)
	f("64KiB", 64<<10)
	f("512 MiB", 512<<20)
	f("8GiB", 8<<30)
	f("8gib", 8<<30)
	f(" 1TiB ", 1<<40)
	f("1.5GiB", 3<<29)
	f("0.25KiB", 256)
	f(".5MiB", 512<<10)
}

func TestParseSizeErrors(t *testing.T) {
	f := func(in, wantErr string) {
		t.Helper()
		_, err := ParseSize(in)
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseSize(%q) error %v; want it to contain %q", in, err, wantErr)
		}
	}
	f("", "no number")
	f("GiB", "no number")
	f("8GB", `unknown unit "GB"`)
	f("8 gigs", `unknown unit "gigs"`)
	f("-1GiB", "unknown unit")
	f("0.1KiB", "not a whole number of bytes")
	f("9999999TiB", "out of range")
	f("1.2.3GiB", "bad fraction")
}

func TestFormatSize(t *testing.T) {
	f := func(n int64, want string) {
		t.Helper()
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q; want %q", n, got, want)
		}
		if back, err := ParseSize(want); n >= 0 && (err != nil || back != n) {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", want, back, err, n)
		}
	}
	f(0, "0B")
	f(1500, "1500B")
	f(4<<10, "4KiB")
	f(1536<<20, "1536MiB")
	f(8<<30, "8GiB")
	f(2<<40, "2TiB")
	f(-4<<10, "-4KiB")
	if got := approxSize(25125007360); got != "23.4GiB" {
		t.Errorf("approxSize = %q; want 23.4GiB", got)
	}
}
