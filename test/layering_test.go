// Package test holds the repository-wide tests: package layering here, and the heavier
// integration tests (real broker processes, ZooKeeper, HDFS) as they arrive.
package test

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const module = "sluice"

// layers gives each package (by path relative to the module root; a trailing "/..."
// covers a tree) its row in STYLE.md's layering, numbered in tens: STYLE.md's row 2 is
// split so that the batch format (20) sits below the wire format, the codec and the
// arena (25), which use it, and row 1 so that internal/loopport and internal/spawn (5)
// sit below the test helpers that use them. A package may import module packages
// only from rows above its own (smaller numbers); a package missing here fails the test,
// so every new package takes a deliberate place.
var layers = []struct {
	pkg string
	row int
}{
	{"internal/loopport", 5},   // loopback ports for servers that restart, below the helpers that start them (peer, testbroker)
	{"internal/spawn", 5},      // children that die with this process, below the helpers that start them
	{"internal/batchtest", 26}, // batches no producer would make, for tests: uses the batch format and the codec
	{"internal/...", 10},       // small helpers, standard library only
	{"persist/vfs/...", 25},    // filesystem interface (direct I/O, fallocate: x/sys/unix) and fault injection
	{"batch", 20},              // the record batch format
	{"wire", 25},               // frames, requests, error codes
	{"auth/scram", 21},         // the SCRAM-SHA-256 exchange
	{"auth/acl", 21},           // ACL rules: evaluation and file format
	{"auth/...", 22},           // the users and ACL files the broker reads (package auth)
	{"codec", 25},              // compression (klauspost/compress)
	{"memarena/...", 25},       // the memory arena
	{"persist", 27},            // the storage seam: Store, Region, errors
	{"persist/local", 30},      // segment log
	{"persist/hdfs", 30},       // HDFS backend and shipper
	{"sched/...", 30},          // shards and mailboxes
	{"engine/...", 40},         // partitions, topics, the write window
	{"netio/...", 50},          // gnet handler, codec, writer
	{"client/...", 50},         // the Go client
	{"broker/...", 60},         // broker assembly
	{"admin/...", 55},          // ZooKeeper placement (the broker follows it)
	{"bench/...", 70},          // bench harness
	{"tools/...", 70},          // operator tools
	{"chaos/...", 70},          // fault-injection harness and its queue checker
	{"cmd/...", 80},            // the binary
	{"test", 90},               // this package
}

// only lists third-party imports that exactly one place may use (STYLE.md rule 5), and
// module packages that some packages must never reach.
var only = map[string]string{
	"github.com/panjf2000/gnet":       "netio",
	"github.com/go-zookeeper/zk":      "admin",
	"github.com/colinmarc/hdfs":       "persist/hdfs",
	"github.com/klauspost/compress":   "codec",
	"github.com/pierrec/lz4":          "codec",
	"github.com/twmb/franz-go":        "bench",
	"github.com/nats-io/nats.go":      "bench",
	"gonum.org/v1/plot":               "bench",
	"github.com/prometheus/client_go": "broker",
}

// clientMaxRow bounds what the client links against: helpers, the batch and wire formats,
// the codec — never the engine, netio or persist.
const clientMaxRow = 25

func rowOf(pkg string) (int, bool) {
	for _, l := range layers {
		if tree, ok := strings.CutSuffix(l.pkg, "/..."); ok {
			if pkg == tree || strings.HasPrefix(pkg, tree+"/") {
				return l.row, true
			}
		} else if pkg == l.pkg {
			return l.row, true
		}
	}
	return 0, false
}

// TestLayering parses the imports of every non-test Go file in the module.
func TestLayering(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		bad, err := checkFile(path, filepath.ToSlash(rel))
		for _, b := range bad {
			t.Error(b)
		}
		checked++
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Fatalf("only %d files checked: is the module root right?", checked)
	}
}

// checkFile returns the layering violations of one file of package pkg.
func checkFile(path, pkg string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
	if err != nil {
		return nil, err
	}
	row, ok := rowOf(pkg)
	if !ok {
		return []string{fmt.Sprintf("%s: package %s has no row in the layering table", path, pkg)}, nil
	}
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, path+": "+fmt.Sprintf(format, args...)) }
	for _, imp := range f.Imports {
		ip := strings.Trim(imp.Path.Value, `"`)
		if inner, ok := strings.CutPrefix(ip, module+"/"); ok {
			irow, known := rowOf(inner)
			related := strings.HasPrefix(inner, pkg+"/") || strings.HasPrefix(pkg, inner+"/")
			switch {
			case !known:
				fail("imports %s, which has no row", ip)
			case irow > row || (irow == row && !related):
				fail("row %d imports %s (row %d): only rows above, or its own parent or children, may be imported", row, ip, irow)
			case strings.HasPrefix(pkg, "client") && irow > clientMaxRow:
				fail("the client may use only the wire format, not %s", ip)
			}
			continue
		}
		if row == 10 && strings.Contains(strings.SplitN(ip, "/", 2)[0], ".") {
			fail("row-1 helpers use the standard library only, not %s", ip)
		}
		for prefix, owner := range only {
			if strings.HasPrefix(ip, prefix) && pkg != owner && !strings.HasPrefix(pkg, owner+"/") {
				fail("imports %s, which only %s may import", ip, owner)
			}
		}
	}
	return bad, nil
}

// TestLayeringCatches makes sure the checker fails on violations.
func TestLayeringCatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.go")
	src := "package local\nimport _ \"sluice/engine\"\nimport _ \"github.com/panjf2000/gnet/v2\"\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bad, err := checkFile(path, "persist/local")
	if err != nil || len(bad) != 2 {
		t.Fatalf("a row-3 package importing engine and gnet: %q, %v", bad, err)
	}
	if bad, _ := checkFile(path, "nowhere"); len(bad) != 1 {
		t.Fatalf("a package without a row: %q", bad)
	}
}
