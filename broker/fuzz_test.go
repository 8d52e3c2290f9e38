package broker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sluice/admin"
	"sluice/persist/local"
	"sluice/wire"
)

// metaBroker is the part of a broker that reads topic directories: its configuration
// (defaults filled as Start fills them) over the data directory dir.
func metaBroker(dir string) *Broker {
	cfg := Config{DataDir: dir}
	cfg.EnsureDefaults()
	return &Broker{cfg: cfg}
}

// FuzzReadMeta gives a topic directory of arbitrary name (a directory found in the data
// directory at start) an arbitrary topic.json, reads it with readMeta, and takes what it
// accepts through what openTopic does before it opens partitions: clampStored, then
// logOptions. It checks: no panic; a refusal names topic.json; an accepted topic has its
// directory's name, which is a valid topic name, and 1 to 65536 partitions, and a layout
// history that is empty or rises in version and count to the current layout; it re-encodes
// (buildTopicDir's encoding) to a topic.json that reads back equal; clampStored raises
// only roll options below today's floors, to the floors; and logOptions either refuses
// the options with a one-line error or returns log options whose bounds hold and that
// pass the log's own validation.
func FuzzReadMeta(f *testing.F) {
	seedDir := f.TempDir()
	b := metaBroker(seedDir)
	for _, m := range []topicMeta{
		{Name: "orders", Version: 1, Partitions: 8, Options: b.resolveOptions(wire.TopicOptions{})},
		{Name: "clicks.v2", Version: 1, Partitions: 1, Options: wire.TopicOptions{RetentionMs: 3_600_000, RetentionBytes: -1, SegmentBytes: 1 << 20, SegmentMs: -1}},
	} {
		if err := b.buildTopicDir(m); err != nil {
			f.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(seedDir, m.Name, metaFile))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(m.Name, raw)
	}
	expanded, _ := json.MarshalIndent(topicMeta{Name: "orders", Version: 3, Partitions: 9, Options: b.resolveOptions(wire.TopicOptions{}),
		History: []admin.Layout{{Version: 1, Partitions: 4}, {Version: 2, Partitions: 6}, {Version: 3, Partitions: 9}}}, "", "  ")
	f.Add("orders", expanded)
	for _, c := range []struct{ name, json string }{
		{"orders", `{"name": "orders", "version": 1, "partitions": 2, "options": {"SegmentMs": 1, "SegmentBytes": 1}}`}, // below the floors
		{"orders", `{"name": "orders", "version": 1, "partitions": 2, "options": {"RetentionMs": -2}}`},
		{"orders", `{"name": "orders", "version": 1, "partitions": 2, "options": {"SegmentBytes": 1099511627777}}`},
		{"orders", `{"name": "other", "version": 1, "partitions": 2}`},
		{"orders", `{"name": "orders", "version": 1, "partitions": 0}`},
		{"orders", `{"name": "orders", "version": 1, "partitions": 65537}`},
		{"a+b", `{"name": "a+b", "version": 1, "partitions": 1}`},
		{"orders", `{"name": "orders", "version": 2, "partitions": 4, "history": [{"version": 1, "partitions": 2}, {"version": 2, "partitions": 3}]}`},
		{"orders", `{"name": "orders", "version": 2, "partitions": 4, "history": [{"version": 2, "partitions": 2}, {"version": 2, "partitions": 4}]}`},
		{"orders", `{"name": "orders", "version": 2, "partitions": 4, "history": [{"version": 1, "partitions": 0}, {"version": 2, "partitions": 4}]}`},
		{"orders", `{"name": "orders"`},
		{"orders", ``},
		{"orders", `null`},
	} {
		f.Add(c.name, []byte(c.json))
	}
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		if name == "" || name == "." || name == ".." || len(name) > 255 || strings.ContainsAny(name, "/\x00") {
			name = "orders" // not a name a directory can have
		}
		dir := t.TempDir()
		b := metaBroker(dir)
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Skipf("no directory named %q here: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, metaFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := b.readMeta(name)
		if err != nil {
			if !strings.Contains(err.Error(), metaFile) {
				t.Fatalf("topic.json %q of %q refused with an error that does not name it: %v", data, name, err)
			}
			return
		}
		if m.Name != name || wire.CheckTopicName(m.Name) != nil || m.Partitions < 1 || m.Partitions > wire.MaxPartitions {
			t.Fatalf("topic.json %q of directory %q accepted as %+v", data, name, m)
		}
		if h := m.History; len(h) > 0 && (h[len(h)-1] != admin.Layout{Version: m.Version, Partitions: m.Partitions} || h[0].Partitions < 1) {
			t.Fatalf("topic.json %q accepted with layouts %+v that do not end at version %d, %d partitions", data, h, m.Version, m.Partitions)
		}
		for k := 1; k < len(m.History); k++ {
			if a, b := m.History[k-1], m.History[k]; b.Version <= a.Version || b.Partitions <= a.Partitions {
				t.Fatalf("topic.json %q accepted with layout %+v after %+v", data, b, a)
			}
		}
		raw, err := json.MarshalIndent(m, "", "  ") // as buildTopicDir writes it
		if err != nil {
			t.Fatalf("cannot re-encode %+v: %v", m, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, metaFile), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		if m2, err := b.readMeta(name); err != nil || !sameMeta(m, m2) {
			t.Fatalf("topic %+v re-encoded as %s reads back as %+v, %v", m, raw, m2, err)
		}

		o := b.clampStored(m)
		minMs := local.MinSegmentAge.Milliseconds()
		if in := m.Options; o.RetentionMs != in.RetentionMs || o.RetentionBytes != in.RetentionBytes ||
			o.SegmentMs != in.SegmentMs && !(in.SegmentMs > 0 && in.SegmentMs < minMs && o.SegmentMs == minMs) ||
			o.SegmentBytes != in.SegmentBytes && !(in.SegmentBytes > 0 && in.SegmentBytes < local.MinSegmentBytes && o.SegmentBytes == local.MinSegmentBytes) {
			t.Fatalf("stored options %+v clamped to %+v", in, o)
		}
		opts, err := b.logOptions(o)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("options %+v refused with an error of several lines: %q", o, err)
			}
			return
		}
		if opts.SegmentBytes != o.SegmentBytes || opts.SegmentAge < 0 || opts.SegmentAge > local.MaxSegmentAge ||
			opts.RetentionBytes < 0 || opts.RetentionAge < 0 || o.RetentionMs > 0 && opts.RetentionAge != time.Duration(o.RetentionMs)*time.Millisecond {
			t.Fatalf("options %+v give log options %v", o, opts.String())
		}
		check := opts
		if err := check.EnsureDefaults().Validate(); err != nil {
			t.Fatalf("options %+v accepted, but the log refuses them: %v", o, err)
		}
	})
}

// sameMeta compares topic metadata, an empty history equal to none (the encoding omits
// both).
func sameMeta(a, b topicMeta) bool {
	return a.Name == b.Name && a.Version == b.Version && a.Partitions == b.Partitions && a.Options == b.Options &&
		slices.Equal(a.History, b.History)
}
