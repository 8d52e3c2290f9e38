//go:build failpoints

package failpoint

import (
	"os"
	"strings"
)

// points is read once at start and never written after: immutable process state.
var points = parse(os.Getenv("SLUICE_FAILPOINTS"))

func parse(s string) map[string]bool {
	m := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv != "" {
			m[kv] = true
		}
	}
	return m
}

// Panic panics when SLUICE_FAILPOINTS lists point=topic.
func Panic(point, topic string) {
	if points[point+"="+topic] {
		panic("failpoint " + point + " hit for topic " + topic)
	}
}

// On reports whether SLUICE_FAILPOINTS lists point=topic: for a fault the code meets by
// another path rather than a panic.
func On(point, topic string) bool { return points[point+"="+topic] }
