// Package lines reads the line-oriented text files of sluice's configuration (the
// users and ACL files): one record a line, blank lines and lines starting with # skipped.
// It has no state; its functions are safe from any goroutine.
package lines

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// maxLine bounds one line.
const maxLine = 1 << 20

// Each calls fn with the number (from 1) and the text, trimmed of surrounding blanks, of
// every line of data that is neither blank nor a comment, and stops at fn's first error,
// which it returns wrapped with the line number as "line N: ...".
func Each(data []byte, fn func(line string) error) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxLine)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		if err := fn(line); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("cannot read lines: %w", err)
	}
	return nil
}
