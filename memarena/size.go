package memarena

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Binary size units accepted by ParseSize and used by FormatSize.
const (
	KiB int64 = 1 << 10
	MiB int64 = 1 << 20
	GiB int64 = 1 << 30
	TiB int64 = 1 << 40
)

var sizeUnits = []struct {
	name string
	mult int64
}{{"TiB", TiB}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}, {"B", 1}}

// ParseSize parses a byte size such as "8GiB", "512 MiB", "1.5GiB", "65536"
// or "4096B". Units are binary (KiB, MiB, GiB, TiB; case-insensitive); a
// plain number is bytes. Decimal units such as "GB" are refused rather than
// guessed, and so is a fraction that is not a whole number of bytes.
func ParseSize(s string) (int64, error) {
	num, unit := splitSize(strings.TrimSpace(s))
	mult, ok := unitMultiplier(unit)
	if !ok {
		return 0, fmt.Errorf("cannot parse size %q: unknown unit %q (want B, KiB, MiB, GiB or TiB)", s, unit)
	}
	n, err := scaleSize(num, mult)
	if err != nil {
		return 0, fmt.Errorf("cannot parse size %q: %w", s, err)
	}
	return n, nil
}

// splitSize splits "1.5 GiB" into "1.5" and "GiB".
func splitSize(s string) (num, unit string) {
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	return s[:i], strings.TrimSpace(s[i:])
}

func unitMultiplier(unit string) (int64, bool) {
	if unit == "" {
		return 1, true
	}
	for _, u := range sizeUnits {
		if strings.EqualFold(unit, u.name) {
			return u.mult, true
		}
	}
	return 0, false
}

// scaleSize returns num*mult exactly, refusing overflow and fractional bytes.
func scaleSize(num string, mult int64) (int64, error) {
	whole, frac, _ := strings.Cut(num, ".")
	if whole == "" && frac == "" {
		return 0, fmt.Errorf("no number")
	}
	w := int64(0)
	if whole != "" {
		v, err := strconv.ParseInt(whole, 10, 64)
		if err != nil || v > math.MaxInt64/mult {
			return 0, fmt.Errorf("number out of range")
		}
		w = v * mult
	}
	if frac == "" {
		return w, nil
	}
	if len(frac) > 12 || strings.ContainsRune(frac, '.') {
		return 0, fmt.Errorf("bad fraction %q", frac)
	}
	f, err := strconv.ParseInt(frac, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad fraction %q", frac)
	}
	den := int64(math.Pow10(len(frac)))
	// f*mult needs up to 80 bits (f < 10^12, mult <= 2^40), so it is taken in 128; the
	// quotient by den fits 64, since f < den makes it less than mult (and Div64's
	// condition, a high word below den, the same fact).
	phi, plo := bits.Mul64(uint64(f), uint64(mult))
	q, r := bits.Div64(phi, plo, uint64(den))
	if r != 0 {
		return 0, fmt.Errorf("not a whole number of bytes")
	}
	extra := int64(q)
	if w > math.MaxInt64-extra {
		return 0, fmt.Errorf("number out of range")
	}
	return w + extra, nil
}

// FormatSize formats n exactly, with the largest binary unit that divides it
// ("8GiB", "1536MiB", "4KiB", "1500B"), so ParseSize(FormatSize(n)) == n.
func FormatSize(n int64) string {
	if n < 0 && n != math.MinInt64 {
		return "-" + FormatSize(-n)
	}
	for _, u := range sizeUnits {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// approxSize formats n with one decimal of the largest unit not above it
// ("23.4GiB"), for messages about sizes no unit divides.
func approxSize(n int64) string {
	for _, u := range sizeUnits[:len(sizeUnits)-1] {
		if n >= u.mult {
			if n%u.mult == 0 {
				return FormatSize(n)
			}
			return strconv.FormatFloat(float64(n)/float64(u.mult), 'f', 1, 64) + u.name
		}
	}
	return FormatSize(n)
}
