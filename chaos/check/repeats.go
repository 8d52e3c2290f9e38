package check

// repeats remembers, for each position of each partition, the record the last read at or
// below C found there, so that History.Read can count and drop a read that only repeats
// it. Every sampler consumer of a run reads its partitions from the oldest record again,
// over and over: an eight-minute run recorded 28 million reads of 800 000 records (about
// 1.1 GB), nearly all of them such repeats. A repeat cannot change the verdict: Check
// takes a position's first read at or below C as what it holds, compares every other
// read with that, and counts a disagreement once per position, so a read equal to one
// already recorded since the position's last cut adds nothing. A cut (History.Cut)
// forgets what it destroyed: a read after it, even of the same record, is recorded,
// since the reads before the cut no longer count as final.
//
// Positions are kept in chunks of repeatChunk offsets, found by a map: recording one
// never copies the others (the readLog's lesson), and a stray offset costs one chunk.
type repeats struct {
	chunks map[repeatKey]*[repeatChunk]seenAt
}

// repeatChunk is the offsets one chunk covers (24 bytes each: 24 KiB a chunk).
const repeatChunk = 1 << 10

type repeatKey struct {
	part  int
	chunk int64
}

// seenAt is the record last read at or below C at one position.
type seenAt struct {
	id ID
	ok bool
}

// keyOf returns the chunk of position (part, off), and off's index in it.
func keyOf(part int, off int64) (repeatKey, int) {
	return repeatKey{part, off / repeatChunk}, int(off % repeatChunk)
}

// repeat reports whether r is a valid read at or below C of the record the last such
// read of its position found; otherwise, when r is one, it remembers r's record there.
func (s *repeats) repeat(r Read) bool {
	if !r.Valid || !r.Durable || r.Offset < 0 {
		return false
	}
	k, i := keyOf(r.Partition, r.Offset)
	c := s.chunks[k]
	if c == nil {
		if s.chunks == nil {
			s.chunks = map[repeatKey]*[repeatChunk]seenAt{}
		}
		c = new([repeatChunk]seenAt)
		s.chunks[k] = c
	}
	if c[i].ok && c[i].id == r.ID {
		return true
	}
	c[i] = seenAt{r.ID, true}
	return false
}

// forget drops what is remembered of partition part from offset from on (a cut).
func (s *repeats) forget(part int, from int64) {
	from = max(from, 0)
	first, at := keyOf(part, from)
	for k, c := range s.chunks {
		switch {
		case k.part != part || k.chunk < first.chunk:
		case k.chunk == first.chunk:
			clear(c[at:])
		default:
			delete(s.chunks, k)
		}
	}
}
