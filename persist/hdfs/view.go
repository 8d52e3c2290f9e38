package hdfs

import (
	"math"
	"os"
	"sort"
)

// fileView is a data file as a reader trusts it: from its base offset up to end.
type fileView struct {
	name  string
	base  int64
	epoch uint64
	size  int64 // bytes, as listed
	end   int64 // where the next trusted file begins; math.MaxInt64 for the last
	index bool  // a sealed file: its index was listed next to it
}

// trusted returns the data files a reader trusts, in order, from a listing of a
// partition's directory (the package comment says why): files sorted by base offset,
// then epoch; a file of an older epoch than one taken before it is fenced; each file
// taken ends where the next one begins; a file that ends where it begins (a later file
// of the same base) is dropped.
func trusted(infos []os.FileInfo) []fileView {
	indexed := map[string]bool{}
	var files []fileView
	for _, fi := range infos {
		name := fi.Name()
		if base, epoch, ok := parseName(name); ok && !fi.IsDir() {
			files = append(files, fileView{name: name, base: base, epoch: epoch, size: fi.Size(), end: math.MaxInt64})
		} else if len(name) > len(indexSuffix) && name[len(name)-len(indexSuffix):] == indexSuffix {
			indexed[name[:len(name)-len(indexSuffix)]] = true
		}
	}
	sort.Slice(files, func(i, j int) bool {
		if files[i].base != files[j].base {
			return files[i].base < files[j].base
		}
		return files[i].epoch < files[j].epoch
	})
	var out []fileView
	var newest uint64
	for _, f := range files {
		if len(out) > 0 && f.epoch < newest {
			continue // fenced: a newer epoch started at or before f's base
		}
		if len(out) > 0 {
			out[len(out)-1].end = f.base
		}
		f.index = indexed[f.name]
		out = append(out, f)
		newest = max(newest, f.epoch)
	}
	kept := out[:0]
	for _, f := range out {
		if f.end > f.base {
			kept = append(kept, f)
		}
	}
	return kept
}
