package codec

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"sluice/batch"
)

// FuzzParseCodec parses arbitrary codec names (a flag or a configuration file's value)
// and the String of arbitrary codec values. It checks: no panic; a name ParseCodec takes
// is a known codec's String in another ASCII case ("ZSTD", "Lz4"), never another
// spelling that Unicode folds to it; that codec's String and its upper case parse back
// to it; a refused name gives codec none and an ErrUnknownName error that quotes the
// name; and the String of every known codec value parses back to it, of every other
// ("codec(5)") is refused.
func FuzzParseCodec(f *testing.F) {
	for c := batch.CodecNone; c <= batch.CodecLZ4; c++ {
		f.Add(c.String(), uint8(c))
		f.Add(strings.ToUpper(c.String()), uint8(c))
	}
	for _, junk := range []string{"", "Zstd ", " s2", "snappy", "gzip", "lz4\x00", "codec(5)", "none\n", "\xff", "ſ2", "zſtd"} {
		f.Add(junk, uint8(7))
	}
	f.Fuzz(func(t *testing.T, name string, v uint8) {
		c, err := ParseCodec(name)
		if err != nil {
			if c != batch.CodecNone || !errors.Is(err, ErrUnknownName) || !strings.Contains(err.Error(), strconv.Quote(name)) {
				t.Fatalf("ParseCodec(%q) = %v, %v: want none and an error naming the input", name, c, err)
			}
		} else {
			if c > batch.CodecLZ4 || toLowerASCII(name) != c.String() {
				t.Fatalf("ParseCodec(%q) = %v, not that codec's name in any ASCII case", name, c)
			}
			for _, s := range []string{c.String(), strings.ToUpper(c.String())} {
				if c2, err := ParseCodec(s); err != nil || c2 != c {
					t.Fatalf("ParseCodec(%q) = %v, but ParseCodec(%q) = %v, %v", name, c, s, c2, err)
				}
			}
		}
		c = batch.Codec(v)
		c2, err := ParseCodec(c.String())
		if known := c <= batch.CodecLZ4; known && (err != nil || c2 != c) || !known && err == nil {
			t.Fatalf("codec %d's name %q parses as %v, %v", v, c.String(), c2, err)
		}
	})
}

// toLowerASCII returns s with its ASCII upper-case letters made lower case, nothing
// else (written apart from ParseCodec's own folding, which it checks).
func toLowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
