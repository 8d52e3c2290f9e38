package memlimit

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRead reads limits from cgroup trees laid out as the kernel lays them out (files
// written here: the real ones cannot be set without privileges): v2 with the smallest
// limit of the cgroup and its ancestors, "max" as none, a namespaced cgroup, v1's
// hierarchical limit and its "no limit" value.
func TestRead(t *testing.T) {
	write := func(root string, files map[string]string) {
		for name, body := range files {
			p := filepath.Join(root, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range []struct {
		name        string
		proc        string
		files       map[string]string
		limit, used int64
		ok          bool
	}{
		{"v2, the parent's limit is smaller", "0::/a/b\n", map[string]string{
			"a/memory.max": "2147483648\n", "a/b/memory.max": "4294967296\n", "a/b/memory.current": "1000\n"},
			2 << 30, 1000, true},
		{"v2, no limit", "0::/a\n", map[string]string{"a/memory.max": "max\n", "a/memory.current": "5\n"}, 0, 0, false},
		{"v2, namespaced: the cgroup is the mount's root", "0::/gone\n", map[string]string{
			"memory.max": "1073741824\n", "memory.current": "7\n"}, 1 << 30, 7, true},
		{"v1, hierarchical limit", "4:memory:/x\n3:cpu:/\n", map[string]string{
			"memory/x/memory.limit_in_bytes": "9223372036854771712\n",
			"memory/x/memory.stat":           "cache 1\nhierarchical_memory_limit 536870912\n",
			"memory/x/memory.usage_in_bytes": "42\n"}, 512 << 20, 42, true},
		{"v1, no limit", "4:memory:/x\n", map[string]string{
			"memory/x/memory.limit_in_bytes": "9223372036854771712\n",
			"memory/x/memory.stat":           "hierarchical_memory_limit 9223372036854771712\n"}, 0, 0, false},
		{"no memory controller", "3:cpu:/\n", nil, 0, 0, false},
	} {
		root := t.TempDir()
		write(root, c.files)
		limit, used, ok := read([]byte(c.proc), root)
		if limit != c.limit || used != c.used || ok != c.ok {
			t.Errorf("%s: %d, %d, %v; want %d, %d, %v", c.name, limit, used, ok, c.limit, c.used, c.ok)
		}
	}
}
