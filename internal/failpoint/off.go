//go:build !failpoints

package failpoint

// Panic does nothing: failpoints are compiled out.
func Panic(point, topic string) {}

// On reports false: failpoints are compiled out.
func On(point, topic string) bool { return false }
