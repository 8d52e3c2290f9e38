//go:build !failpoints

package failpoint

// Panic does nothing: failpoints are compiled out.
func Panic(point, topic string) {}
