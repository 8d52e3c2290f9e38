package lines

import (
	"errors"
	"strings"
	"testing"
)

// TestEach: blanks and comments are skipped, lines are trimmed, an error names its line,
// and an overlong line is an error.
func TestEach(t *testing.T) {
	var got []string
	err := Each([]byte("  a b \n\n# c\n\t#d\nlast"), func(l string) error { got = append(got, l); return nil })
	if err != nil || strings.Join(got, "|") != "a b|last" {
		t.Fatalf("%q %v", got, err)
	}
	boom := errors.New("boom")
	err = Each([]byte("x\n\ny\n"), func(l string) error {
		if l == "y" {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || err.Error() != "line 3: boom" {
		t.Fatalf("%v", err)
	}
	if err := Each([]byte(strings.Repeat("x", maxLine+1)), func(string) error { return nil }); err == nil {
		t.Fatal("an overlong line read")
	}
}
