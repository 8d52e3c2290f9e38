package local

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestInspect(t *testing.T) {
	src := t.TempDir()
	opts := Options{SegmentBytes: 4 << 10, IndexInterval: 256, Sync: SyncNever}
	bases := buildLog(t, src, opts, 150)
	files, _ := filepath.Glob(filepath.Join(src, "*.log"))

	inspect := func(dir string) ([]error, []BatchInfo) {
		t.Helper()
		var seen []BatchInfo
		problems, err := Inspect(nil, dir, func(b BatchInfo) { seen = append(seen, b) })
		if err != nil {
			t.Fatal(err)
		}
		return problems, seen
	}
	problems, seen := inspect(src)
	if len(problems) != 0 || len(seen) != len(bases)-1 {
		t.Fatalf("healthy log: %v, %d of %d batches", problems, len(seen), len(bases)-1)
	}
	for i, b := range seen {
		if b.Header.BaseOffset != bases[i] {
			t.Fatalf("batch %d at offset %d, want %d", i, b.Header.BaseOffset, bases[i])
		}
	}

	t.Run("corrupt sealed segment", func(t *testing.T) {
		dir := copyDir(t, src)
		path := filepath.Join(dir, filepath.Base(files[1]))
		data, _ := os.ReadFile(path)
		data[300] ^= 1
		os.WriteFile(path, data, 0o644)
		before, _ := os.ReadFile(path)
		problems, _ := inspect(dir)
		var ce *CorruptionError
		if len(problems) != 1 || !errors.As(problems[0], &ce) || ce.File != path || ce.Pos > 300 {
			t.Fatalf("problems: %v", problems)
		}
		if after, _ := os.ReadFile(path); string(after) != string(before) {
			t.Fatal("Inspect changed the file")
		}
	})
	t.Run("torn tail", func(t *testing.T) {
		dir := copyDir(t, src)
		path := filepath.Join(dir, filepath.Base(files[len(files)-1]))
		data, _ := os.ReadFile(path)
		all := layout(t, src)
		end := all[len(all)-1].pos + all[len(all)-1].size // the last batch, cut short
		os.WriteFile(path, data[:end-3], 0o644)
		problems, _ := inspect(dir)
		if len(problems) != 1 || !errors.Is(problems[0], ErrCorrupt) {
			t.Fatalf("problems: %v", problems)
		}
	})
	t.Run("bad index", func(t *testing.T) {
		// The problem names the index file at fault: the time index here (it named the
		// offset index whatever the file, a review found).
		for _, suffix := range []string{".timeindex", ".index"} {
			dir := copyDir(t, src)
			bad := filepath.Join(dir, filepath.Base(files[2][:len(files[2])-4]+suffix))
			patchFile(t, bad, func(d []byte) []byte { d[len(d)-3] ^= 0xff; return d })
			problems, _ := inspect(dir)
			var ie *IndexError
			if len(problems) != 1 || !errors.As(problems[0], &ie) || ie.File != bad {
				t.Fatalf("%s flipped: problems %v, want one naming %s", suffix, problems, bad)
			}
			os.Remove(bad)
			if problems, _ := inspect(dir); len(problems) != 1 || !errors.As(problems[0], &ie) || ie.File != bad {
				t.Fatalf("%s missing: problems %v, want one naming %s", suffix, problems, bad)
			}
		}
	})
	t.Run("missing segment", func(t *testing.T) {
		dir := copyDir(t, src)
		os.Remove(filepath.Join(dir, filepath.Base(files[1])))
		problems, _ := inspect(dir)
		if len(problems) != 1 || !errors.Is(problems[0], ErrCorrupt) {
			t.Fatalf("problems: %v", problems)
		}
	})
	t.Run("preallocated and padded", func(t *testing.T) { // zeros after the data are not a problem
		dir := copyDir(t, src)
		path := filepath.Join(dir, filepath.Base(files[len(files)-1]))
		data, _ := os.ReadFile(path)
		all := layout(t, src)
		end := all[len(all)-1].pos + all[len(all)-1].size
		if len(data) != int(opts.SegmentBytes) || !allZero(data[end:]) {
			t.Fatalf("the active segment is %d bytes with data to %d: not preallocated", len(data), end)
		}
		if problems, seen := inspect(dir); len(problems) != 0 || len(seen) != len(bases)-1 {
			t.Fatalf("problems %v, %d batches", problems, len(seen))
		}
		data[end+200] = 1 // a flipped bit in the preallocated space, away from where a header would be
		os.WriteFile(path, data, 0o644)
		if problems, seen := inspect(dir); len(problems) != 0 || len(seen) != len(bases)-1 {
			t.Fatalf("problems %v, %d batches", problems, len(seen))
		}
	})
	t.Run("foreign file", func(t *testing.T) {
		dir := copyDir(t, src)
		os.WriteFile(filepath.Join(dir, "x.bin"), nil, 0o644)
		problems, _ := inspect(dir)
		if len(problems) != 1 || !errors.Is(problems[0], ErrForeignFile) {
			t.Fatalf("problems: %v", problems)
		}
	})
}
