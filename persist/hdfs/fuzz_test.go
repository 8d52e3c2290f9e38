package hdfs

import (
	"bytes"
	"math"
	"slices"
	"testing"

	"sluice/batch"
)

// FuzzParseName parses arbitrary names found in a partition's HDFS directory, and makes
// names of arbitrary base offsets and epochs with fileName. It checks: no panic; a name
// parseName takes for a data file has a base offset not below zero and is exactly the
// name fileName gives that base and epoch (any other name is not a data file: it is
// left out of the listing the readers trust); fileName's name of any base not below zero
// parses back to that base and epoch.
func FuzzParseName(f *testing.F) {
	for _, c := range []struct {
		base  int64
		epoch uint64
	}{{0, 0}, {0, 1}, {4096, 7}, {math.MaxInt64, math.MaxUint64}} {
		f.Add(fileName(c.base, c.epoch), c.base, c.epoch)
	}
	for _, name := range []string{
		"", ".log", "x.log", fileName(5, 1) + indexSuffix, fileName(5, 1) + ".tmp", "00000000000000000005.1.log",
		"-0000000000000000005.00000000000000000001.log", "00000000000000000005-00000000000000000001.log",
		"99999999999999999999.00000000000000000001.log", "00000000000000000005.99999999999999999999.log",
	} {
		f.Add(name, int64(1), uint64(1))
	}
	f.Fuzz(func(t *testing.T, name string, base int64, epoch uint64) {
		if b, e, ok := parseName(name); ok {
			if b < 0 || fileName(b, e) != name {
				t.Fatalf("name %q taken for the data file of base %d and epoch %d, which is named %q", name, b, e, fileName(b, e))
			}
		} else if b != 0 || e != 0 {
			t.Fatalf("name %q refused with base %d and epoch %d", name, b, e)
		}
		if base < 0 {
			return
		}
		if b, e, ok := parseName(fileName(base, epoch)); !ok || b != base || e != epoch {
			t.Fatalf("fileName(%d, %d) = %q parses as %d, %d, %v", base, epoch, fileName(base, epoch), b, e, ok)
		}
	})
}

// FuzzWalkBatches walks arbitrary bytes, cut into pieces of arbitrary lengths (empty
// ones too) as arena chunks cut a commit round (Writer.Commit checks a round with it
// before shipping it), from an arbitrary first offset. It
// checks: no panic; the answer does not depend on the cut (the same as for the bytes in
// one piece: offset, size, error or not, the batches visited); it is a model's walk of
// the bytes in one piece: whole batches whose headers parse (the CRC is not checked),
// back to back to the last byte, the first at the offset given and each following the
// last; and a refusal has a message.
func FuzzWalkBatches(f *testing.F) {
	data, _ := batches(7, 8, "a")
	f.Add(data, []byte{}, int64(7))
	f.Add(data, []byte{1, 55, 56, 57, 0, 200}, int64(7))
	f.Add(data, []byte{0, 3}, int64(8))
	f.Add(data[:len(data)-1], []byte{100}, int64(7))
	f.Add(append(bytes.Clone(data), data[:10]...), []byte{13}, int64(7))
	f.Add([]byte{}, []byte{0}, int64(0))
	f.Add([]byte("not a batch at all, and not a header either: just junk bytes"), []byte{5}, int64(0))
	type visit struct{ pos, base int64 }
	f.Fuzz(func(t *testing.T, data, cuts []byte, next int64) {
		var pieces [][]byte // a piece of each length in cuts (0: empty), then the rest
		rest := data
		for _, c := range cuts {
			n := min(len(rest), int(c))
			pieces, rest = append(pieces, rest[:n]), rest[n:]
		}
		pieces = append(pieces, rest)
		walk := func(pieces [][]byte) (int64, int64, []visit, error) {
			var vs []visit
			got, n, err := walkBatches(pieces, next, func(pos, base int64) { vs = append(vs, visit{pos, base}) })
			return got, n, vs, err
		}
		got, n, vs, err := walk(pieces)
		got1, n1, vs1, err1 := walk([][]byte{data})
		if got != got1 || n != n1 || (err == nil) != (err1 == nil) || err == nil && !slices.Equal(vs, vs1) {
			t.Fatalf("cut into %d pieces: %d, %d, %v, %v; in one piece: %d, %d, %v, %v", len(pieces), got, n, err, vs, got1, n1, err1, vs1)
		}
		if err != nil {
			if err.Error() == "" || got != 0 || n != 0 {
				t.Fatalf("refused with %d, %d and error %q", got, n, err)
			}
		}
		// The model, on the bytes in one piece.
		var want []visit
		o, pos, ok := next, 0, true
		for pos < len(data) {
			h, herr := batch.ParseHeader(data[pos:])
			if herr != nil || h.BaseOffset != o || pos+h.Size() > len(data) {
				ok = false
				break
			}
			want = append(want, visit{int64(pos), o})
			o, pos = h.LastOffset()+1, pos+h.Size()
		}
		if ok != (err == nil) || ok && (got != o || n != int64(len(data)) || !slices.Equal(vs, want)) {
			t.Fatalf("walk: %d, %d, %v, visits %v; the model: %d, ok %v, visits %v", got, n, err, vs, o, ok, want)
		}
	})
}
