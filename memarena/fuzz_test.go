package memarena

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseSize parses arbitrary byte sizes (arena.size, log.segment_bytes and the other
// size settings of a broker's config file and flags) and formats arbitrary sizes. It
// checks: no panic; a size ParseSize accepts is exactly its number times its unit
// (computed with big rationals), a whole number of bytes not below zero, and a refused
// one gets an error quoting it; a size written as ParseSize's grammar has it (a number,
// its fraction of at most 12 digits, and B, KiB, MiB, GiB or TiB or nothing) whose exact
// value is a whole number of bytes that fits an int64 is accepted; FormatSize of an
// accepted size parses back to it, as does FormatSize of any size not below zero.
func FuzzParseSize(f *testing.F) {
	for _, n := range []int64{0, 4096, 64 << 10, 3 << 29, 1 << 40, 1500, math.MaxInt64} {
		f.Add(FormatSize(n), n)
	}
	for _, s := range []string{
		"512 MiB", " 1TiB ", "8gib", "1.5GiB", "0.25KiB", ".5MiB", "5.", "0.000000000001TiB",
		"", ".", "GiB", "8GB", "8 gigs", "-1GiB", "0.1KiB", "9999999TiB", "1.2.3GiB", "8388607.999999999999TiB",
	} {
		f.Add(s, int64(-1))
	}
	f.Fuzz(func(t *testing.T, s string, n int64) {
		got, err := ParseSize(s)
		exact, grammatical := exactSize(s)
		switch {
		case err != nil && (got != 0 || !strings.Contains(err.Error(), strconv.Quote(s))):
			t.Fatalf("ParseSize(%q) = %d, %v", s, got, err)
		case err == nil && (exact == nil || !exact.IsInt() || exact.Num().Cmp(big.NewInt(got)) != 0 || got < 0):
			t.Fatalf("ParseSize(%q) = %d, but it is %s bytes", s, got, exactString(exact))
		case err != nil && grammatical && exact.IsInt() && exact.Num().IsInt64():
			t.Fatalf("ParseSize(%q) refused %s bytes: %v", s, exactString(exact), err)
		}
		if err == nil {
			if back, err := ParseSize(FormatSize(got)); err != nil || back != got {
				t.Fatalf("ParseSize(%q) = %d, formatted as %q, parses as %d, %v", s, got, FormatSize(got), back, err)
			}
		}
		if n < 0 {
			return
		}
		if back, err := ParseSize(FormatSize(n)); err != nil || back != n {
			t.Fatalf("FormatSize(%d) = %q parses as %d, %v", n, FormatSize(n), back, err)
		}
	})
}

// exactSize is the value of s read as ParseSize's grammar has it, with big rationals: a
// number of digits with at most one '.' and digits on at least one side, then a binary
// unit (any case) or none, spaces around either. It returns nil when s is no such size,
// and grammatical false also for a fraction longer than the 12 digits ParseSize takes.
func exactSize(s string) (value *big.Rat, grammatical bool) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(s)
	}
	num, unit := s[:i], strings.TrimSpace(s[i:])
	m := int64(0)
	for name, mult := range map[string]int64{"": 1, "B": 1, "KiB": KiB, "MiB": MiB, "GiB": GiB, "TiB": TiB} {
		if strings.EqualFold(unit, name) {
			m = mult
		}
	}
	whole, frac, _ := strings.Cut(num, ".")
	if m == 0 || whole == "" && frac == "" || strings.Contains(frac, ".") {
		return nil, false
	}
	v, ok := new(big.Rat).SetString("0" + whole + "." + frac + "0")
	if !ok {
		return nil, false
	}
	return v.Mul(v, new(big.Rat).SetInt64(m)), len(frac) <= 12
}

// exactString formats an exact size for a message ("no" for no size).
func exactString(v *big.Rat) string {
	if v == nil {
		return "no"
	}
	if v.IsInt() {
		return v.Num().String()
	}
	return v.FloatString(6)
}
