package chaos

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"

	"sluice/batch"
	"sluice/chaos/check"
	"sluice/codec"
	"sluice/persist"
	"sluice/persist/local"
)

// File damage is injected into a partition directory while its broker is stopped:
//
//   - torn: the last segment file is cut inside one of its last batches, as a crash in
//     the middle of a write leaves it;
//   - bitflip: one bit of a random batch of any segment is flipped, as a bad disk
//     does.
//
// Either destroys the batch it hits, and the broker then removes everything after it:
// recovery cuts a torn tail above the recovery point by itself; damage at or below it
// (acknowledged data) makes the partition refuse writes until `sluice segment repair`
// cuts it, which the harness runs as an operator would. So every record from the hit
// batch to the end of the partition is destroyed by the fault, acknowledged or not:
// those records are the damage's shadow, which the checker counts as damaged, not lost,
// when they never come back. A producer still holding a shadow record sends it again.

// damageKind names the two kinds of file damage.
type damageKind string

const (
	torn    damageKind = "torn"
	bitflip damageKind = "bitflip"
)

// damaged is what injectDamage did.
type damaged struct {
	shadow []check.ID // the records it destroyed
	from   int64      // the first offset destroyed; -1 when nothing was
	note   string
}

// injectDamage damages the partition in dir. A partition with no batch is left alone.
func injectDamage(dir string, kind damageKind, rng *rand.Rand) (damaged, error) {
	var batches []local.BatchInfo
	if _, err := local.Inspect(nil, dir, func(b local.BatchInfo) { batches = append(batches, b) }); err != nil {
		return damaged{}, fmt.Errorf("cannot inspect %s: %w", dir, err)
	}
	if len(batches) == 0 {
		return damaged{from: -1, note: "no batch to damage"}, nil
	}
	hit := rng.IntN(len(batches))
	if kind == torn { // one of the last 8 batches of the last segment
		last := batches[len(batches)-1].Segment
		first := len(batches) - 1
		for first > 0 && batches[first-1].Segment == last && len(batches)-first < 8 {
			first--
		}
		hit = first + rng.IntN(len(batches)-first)
	}
	shadow, err := shadowOf(batches[hit:])
	if err != nil {
		return damaged{}, err
	}
	b := batches[hit]
	pos := b.Pos + rng.Int64N(int64(b.Header.Size()))
	if kind == torn {
		err = os.Truncate(b.Segment, pos)
	} else {
		err = flipBit(b.Segment, pos, uint(rng.IntN(8)))
	}
	if err != nil {
		return damaged{}, fmt.Errorf("cannot damage %s: %w", b.Segment, err)
	}
	return damaged{shadow: shadow, from: b.Header.BaseOffset, note: fmt.Sprintf("%s at %s position %d (batch at offset %d; %d records from it on destroyed)",
		kind, b.Segment, pos, b.Header.BaseOffset, len(shadow))}, nil
}

// shadowOf returns the identities in the values of the given batches' records, whatever
// their codec.
func shadowOf(batches []local.BatchInfo) ([]check.ID, error) {
	files := map[string][]byte{}
	var ids []check.ID
	var d codec.Decompressor
	for _, b := range batches {
		data, ok := files[b.Segment]
		if !ok {
			var err error
			if data, err = os.ReadFile(b.Segment); err != nil {
				return nil, fmt.Errorf("cannot read %s: %w", b.Segment, err)
			}
			files[b.Segment] = data
		}
		var it batch.Iter
		if err := d.Iter(&it, data[b.Pos:b.Pos+int64(b.Header.Size())]); err != nil {
			return nil, fmt.Errorf("cannot read the batch at %s position %d: %w", b.Segment, b.Pos, err)
		}
		for it.Next() {
			if id, err := check.DecodeValue(it.Record().Value); err == nil {
				ids = append(ids, id)
			}
		}
		if err := it.Err(); err != nil { // read before the damage: the broker stored it so
			return nil, fmt.Errorf("cannot read the records of the batch at %s position %d: %w", b.Segment, b.Pos, err)
		}
	}
	return ids, nil
}

// flipBit flips one bit of the byte at pos of file.
func flipBit(file string, pos int64, bit uint) error {
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, pos); err != nil {
		return err
	}
	b[0] ^= 1 << bit
	if _, err := f.WriteAt(b, pos); err != nil {
		return err
	}
	return f.Sync()
}

// repairDamage runs `sluice segment repair` on the partition in dir when it holds damage
// that the broker would not cut by itself (at or below the recovery point), as the
// broker's log tells an operator to. It returns the offset it cut at, -1 when it did not.
func repairDamage(binary, dir string) (int64, error) {
	problems, err := local.Inspect(nil, dir, nil)
	if err != nil {
		return -1, fmt.Errorf("cannot inspect %s: %w", dir, err)
	}
	for _, p := range problems {
		var de *local.DamageError
		if !errors.As(p, &de) {
			continue
		}
		var ce *persist.CorruptionError
		if !errors.As(de, &ce) || ce.Offset < 0 {
			return -1, fmt.Errorf("damage in %s without an offset to cut at: %w", dir, p)
		}
		out, err := exec.Command(binary, "segment", "repair", dir, "--truncate-at", fmt.Sprint(ce.Offset)).CombinedOutput()
		if err != nil {
			return -1, fmt.Errorf("cannot repair %s at %d: %w\n%s", dir, ce.Offset, err, out)
		}
		return ce.Offset, nil
	}
	return -1, nil
}
