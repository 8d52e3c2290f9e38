package hdfstest

import "testing"

// TestCheckDir: a directory with a comma is refused before any JVM starts (Hadoop would
// split it and write below the working directory); others pass.
func TestCheckDir(t *testing.T) {
	f := func(dir string, ok bool) {
		t.Helper()
		if err := checkDir(dir); (err == nil) != ok {
			t.Fatalf("checkDir(%q) = %v, want ok %v", dir, err, ok)
		}
	}
	f("/tmp/BenchmarkX/brokers=3-load/001", true)
	f("/tmp/BenchmarkXbrokers=3,load123/001", false)
}
