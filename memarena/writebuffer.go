package memarena

import (
	"fmt"
	"math"
	"sync"
)

// WriteBuffer is one partition's tail of the log in memory: whole batches in
// a chain of chunks, at the stream positions they have in the segment files
// (see wbindex.go), indexed by offset. Its shard appends and reads; the
// persister holds ranges of it to write them to a file (Range); the
// reclaimer, on any goroutine, takes its oldest chunks once their batches
// are durable. Every method locks the buffer once (per batch, never per
// record) and is safe for concurrent use.
type WriteBuffer struct {
	a        *Arena
	st       ownerState
	min, max int64 // Config.PartitionMin and PartitionMax

	mu struct {
		sync.Mutex
		closed     bool
		growing    bool // Append is allocating: keep the tail chunk
		reserved   bool // Reserve made room for the next Append: keep the tail chunk
		held       bool // Hold made room for a request's batches: Appends keep it until Release
		chain      chain
		idx        batchIndex
		headPos    int64 // stream position where the first chunk starts: a multiple of ChunkSize
		tailPos    int64 // stream position of the next byte to append
		durablePos int64 // start of the first batch past the checkpoint; tailPos if none
		dataEnd    int64 // batch bytes ever appended
		dataDur    int64 // of those, below durablePos
		next       int64 // offset the next batch must start at
		durable    int64 // the checkpoint: highest durable offset
		bytes      int64 // chain length * ChunkSize
		hits       uint64
		misses     uint64
		scratch    []uint32
	}
}

// WriteBufferStats describes one write buffer.
type WriteBufferStats struct {
	Bytes        int64  // chunk bytes held
	Chunks       int    // chunks held
	PendingBytes int64  // bytes of batches past the checkpoint
	FirstOffset  int64  // first offset in memory; -1 if none
	NextOffset   int64  // offset the next batch must start at
	TailPos      int64  // stream position the next batch goes to
	Durable      int64  // the checkpoint given to SetDurable
	Hits, Misses uint64 // reads served from memory, reads that missed
}

// NewWriteBuffer is NewWriteBufferAt(next, 0).
func (a *Arena) NewWriteBuffer(next int64) (*WriteBuffer, error) { return a.NewWriteBufferAt(next, 0) }

// NewWriteBufferAt returns an empty write buffer whose first batch must start
// at offset next, the partition's log end, and at stream position pos, the
// position of the log end in the active segment's file (docs/writepath.md
// §1); everything before next counts as durable. Each buffer is capped by
// Config.PartitionMax.
func (a *Arena) NewWriteBufferAt(next, pos int64) (*WriteBuffer, error) {
	if a.closed.Load() {
		return nil, ErrClosed
	}
	if next < 0 || pos < 0 {
		return nil, fmt.Errorf("cannot create write buffer at offset %d, position %d: %w", next, pos, ErrInvalid)
	}
	w := &WriteBuffer{a: a, min: a.cfg.PartitionMin, max: a.cfg.PartitionMax}
	w.st.id = a.newOwnerID()
	w.mu.next, w.mu.durable = next, next-1
	w.mu.headPos, w.mu.tailPos, w.mu.durablePos = a.chunkFloor(pos), pos, pos
	w.mu.idx.pool = &a.indexGroups
	a.c.writeBuffers.Add(1)
	return w, nil
}

// Append copies a whole batch holding offsets [baseOffset, lastOffset] into
// the buffer at the tail's stream position (TailPos in Stats); baseOffset
// must be the previous batch's lastOffset+1. It fails with
// ErrPartitionFull or ErrFull (errors.Is(err, ErrFull) for both) when memory
// is full of data past the checkpoint, and leaves the buffer as it was.
// Steady-state appends do not allocate on the Go heap.
func (w *WriteBuffer) Append(batch []byte, baseOffset, lastOffset int64) error {
	n := int64(len(batch))
	if err := w.checkBatch(n, baseOffset, lastOffset); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.mu.closed:
		return ErrClosed
	case baseOffset != w.mu.next:
		return fmt.Errorf("cannot append batch at offset %d, want %d: %w", baseOffset, w.mu.next, ErrOffsetOrder)
	}
	if err := w.reserveLocked(n); err != nil {
		return err
	}
	w.appendLocked(batch, baseOffset, lastOffset)
	if !w.mu.held {
		w.endReserveLocked()
	}
	if invariantsOn {
		w.checkLocked()
	}
	return nil
}

func (w *WriteBuffer) checkBatch(n, base, last int64) error {
	if base < 0 || last < base || last-base > math.MaxInt32 {
		return fmt.Errorf("cannot append batch with offsets %d..%d: %w", base, last, ErrInvalid)
	}
	return w.checkSize(n)
}

// checkSize refuses a batch of n bytes that no buffer could ever take.
func (w *WriteBuffer) checkSize(n int64) error {
	switch {
	case n == 0:
		return fmt.Errorf("cannot append an empty batch: %w", ErrInvalid)
	case n > MaxBatchSize || n > w.max:
		return fmt.Errorf("cannot append batch of %d bytes: %w", n, ErrTooLarge)
	}
	return nil
}

// reserveLocked makes room for n more bytes at the tail.
func (w *WriteBuffer) reserveLocked(n int64) error {
	cs := w.a.chunkSize
	need := w.needLocked(n)
	if need == 0 {
		return nil
	}
	// Over PartitionMax: give up our own oldest durable chunks first, the
	// tail too if all is durable (then the batch starts a fresh chunk).
	for w.mu.bytes+need*cs > w.max && w.reclaimableLocked() {
		w.reclaimOneLocked()
		w.a.c.reclaimed.Add(cs)
		need = w.needLocked(n)
	}
	// An empty buffer always takes a batch of at most PartitionMax, which
	// may then hold one chunk more than that: its first chunk starts at a
	// multiple of ChunkSize below the tail.
	if w.mu.bytes+need*cs > w.max && w.mu.bytes > 0 {
		return ErrPartitionFull
	}
	// What an empty buffer cannot take from an empty arena it never will:
	// refused as too large, not as full, which a producer would retry for
	// ever (a review found a batch of the arena's size, plus the padding a
	// roll may put before it, answered busy until the deadline).
	if w.mu.bytes == 0 && need > w.a.nChunks {
		return fmt.Errorf("cannot make room for %d bytes in an arena of %d: %w", n, w.a.cfg.Size, ErrTooLarge)
	}
	w.mu.growing = true
	defer w.endGrowLocked()
	return w.growLocked(need)
}

// needLocked returns how many chunks n more bytes need beyond the tail's room.
// The room is negative when Skip moved the tail past the last chunk; the
// chunks then added start at the chain's end, so it stays contiguous.
func (w *WriteBuffer) needLocked(n int64) int64 {
	space := w.mu.headPos + int64(w.mu.chain.len())*w.a.chunkSize - w.mu.tailPos
	if n <= space {
		return 0
	}
	return (n - space + w.a.chunkSize - 1) >> w.a.chunkShift
}

// endGrowLocked ends a reserve: the tail chunk is reclaimable again, and the
// reclaimer, which dropped the buffer from its queue if it saw nothing but
// the tail, must hear of it if the append fails.
func (w *WriteBuffer) endGrowLocked() {
	w.mu.growing = false
	if w.reclaimableLocked() {
		w.a.enqueueLocked(w)
	}
}

// growLocked adds need chunks to the chain, all or none.
func (w *WriteBuffer) growLocked(need int64) error {
	s := w.mu.scratch[:0]
	for range need {
		id, err := w.a.alloc(w, w.st.id)
		if err != nil {
			for _, id := range s {
				w.a.unref(id)
			}
			w.mu.scratch = s[:0]
			return err
		}
		s = append(s, id)
	}
	for _, id := range s {
		w.mu.chain.pushBack(id)
	}
	w.mu.scratch = s[:0]
	w.mu.bytes += need * w.a.chunkSize
	w.a.c.writeBufferBytes.Add(need * w.a.chunkSize)
	return nil
}

// appendLocked copies the batch at the tail and indexes it; room is there.
func (w *WriteBuffer) appendLocked(batch []byte, base, last int64) {
	start := w.mu.tailPos
	w.copyLocked(batch, start)
	n := int64(len(batch))
	end := start + n
	w.mu.tailPos = end
	w.mu.idx.add(base, last, start, end, w.mu.dataEnd)
	w.mu.dataEnd += n
	w.mu.next = last + 1
	if last <= w.mu.durable { // so was every batch before it: durablePos was start
		w.mu.durablePos, w.mu.dataDur = end, w.mu.dataEnd
	} else {
		w.a.c.pending.Add(n)
	}
	if w.reclaimableLocked() {
		w.a.enqueueLocked(w)
	}
}

func (w *WriteBuffer) copyLocked(b []byte, pos int64) {
	now := w.a.clock()
	for len(b) > 0 {
		id, off := w.locateLocked(pos)
		n := copy(w.a.chunkData(id)[off:], b)
		w.a.meta(id).stamp = now
		b = b[n:]
		pos += int64(n)
	}
}

// locateLocked returns the chunk and the offset in it of stream position pos.
func (w *WriteBuffer) locateLocked(pos int64) (uint32, int64) {
	rel := pos - w.mu.headPos
	return w.mu.chain.at(rel >> w.a.chunkShift), rel & (w.a.chunkSize - 1)
}

// SetDurable advances the checkpoint: batches whose last offset is at most
// offset may now be reclaimed. A lower offset than before is ignored.
func (w *WriteBuffer) SetDurable(offset int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.closed || offset <= w.mu.durable {
		return
	}
	w.mu.durable = offset
	pos, data := w.mu.tailPos, w.mu.dataEnd
	if offset < w.mu.next-1 {
		// The first batch past the checkpoint; padding before it is behind too.
		var ok bool
		if pos, data, ok = w.mu.idx.startOf(offset + 1); !ok {
			return
		}
	}
	if pos > w.mu.durablePos {
		w.a.c.pending.Add(w.mu.dataDur - data)
		w.mu.durablePos, w.mu.dataDur = pos, data
	}
	if w.reclaimableLocked() {
		w.a.enqueueLocked(w)
	}
	if invariantsOn {
		w.checkLocked()
	}
}

// Read appends to dst held spans of whole batches, starting with the batch
// that holds offset, up to maxBytes of batches (but always the first batch
// whole), in order, leaving out the padding between segments; each span
// lies in one chunk and must be released. It returns ErrMiss if that batch
// is no longer in memory (read it from the log), and dst unchanged if offset
// is at or past NextOffset. It allocates nothing if dst has room.
func (w *WriteBuffer) Read(offset int64, maxBytes int, dst []Span) ([]Span, error) {
	spans, _, err := w.ReadNext(offset, maxBytes, dst)
	return spans, err
}

// ReadNext is Read that also returns the offset after the last batch read (offset
// itself when it read none): the offset a reader asks for next, known from the batch
// index without reading a batch header.
func (w *WriteBuffer) ReadNext(offset int64, maxBytes int, dst []Span) ([]Span, int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.mu.closed:
		return dst, offset, ErrClosed
	case offset >= w.mu.next:
		return dst, offset, nil
	}
	g, j, ok := w.findLocked(offset)
	if !ok {
		w.mu.misses++
		w.a.c.readMisses.Add(1)
		return dst, offset, ErrMiss
	}
	w.mu.hits++
	w.a.c.readHits.Add(1)
	dst, next := w.readLocked(g, j, int64(max(maxBytes, 0)), dst)
	return dst, next, nil
}

// readLocked appends spans of whole batches from batch (g, j) on, within
// maxBytes of batch bytes but the first batch whole, and returns the offset
// after the last batch. A run of back-to-back batches ends at padding, which
// the spans leave out.
func (w *WriteBuffer) readLocked(g, j int, maxBytes int64, dst []Span) ([]Span, int64) {
	x := &w.mu.idx
	_, _, start, end := x.batch(g, j)
	run, limit := start, start+max(maxBytes, end-start) // limit: stream position of the budget's end
	var k int
	for {
		gr := x.groups[g]
		k = x.lastWithin(g, j, limit)
		end = gr.start + int64(gr.end[k])
		if k < len(gr.end)-1 || g+1 == len(x.groups) {
			break
		}
		next := x.groups[g+1]
		gap := next.start - end
		if next.start+int64(next.end[0])-gap > limit {
			break
		}
		if gap > 0 {
			dst = w.spansLocked(run, end, dst)
			run, limit = next.start, limit+gap
		}
		g, j = g+1, 0
	}
	_, last, _, _ := x.batch(g, k)
	return w.spansLocked(run, end, dst), last + 1
}

// findLocked finds the live batch holding offset (< next).
func (w *WriteBuffer) findLocked(offset int64) (g, j int, ok bool) {
	if w.mu.idx.empty() {
		return 0, 0, false
	}
	g, j, ok = w.mu.idx.find(offset)
	if !ok {
		return 0, 0, false
	}
	if base, _, _, _ := w.mu.idx.batch(g, j); base > offset {
		return 0, 0, false // before the first batch in memory
	}
	return g, j, true
}

// spansLocked appends held spans covering stream range [start, end).
func (w *WriteBuffer) spansLocked(start, end int64, dst []Span) []Span {
	now := w.a.clock()
	for pos := start; pos < end; {
		id, off := w.locateLocked(pos)
		n := min(w.a.chunkSize-off, end-pos)
		w.a.meta(id).stamp = now
		dst = append(dst, w.a.holdSpan(id, off, n))
		pos += n
	}
	return dst
}

// Close frees the buffer's chunks (spans still held stay valid until
// released). Later calls fail with ErrClosed.
func (w *WriteBuffer) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.closed {
		return
	}
	w.mu.closed = true
	for w.mu.chain.len() > 0 {
		w.a.unref(w.mu.chain.popFront())
	}
	w.a.c.writeBufferBytes.Add(-w.mu.bytes)
	w.a.c.pending.Add(w.mu.dataDur - w.mu.dataEnd)
	w.mu.bytes, w.mu.durablePos, w.mu.dataDur = 0, w.mu.tailPos, w.mu.dataEnd
	w.mu.headPos = w.a.chunkFloor(w.mu.tailPos)
	w.mu.idx.reset()
	w.a.c.writeBuffers.Add(-1)
}

// Stats describes the buffer.
func (w *WriteBuffer) Stats() WriteBufferStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := WriteBufferStats{
		Bytes:        w.mu.bytes,
		Chunks:       w.mu.chain.len(),
		PendingBytes: w.mu.dataEnd - w.mu.dataDur,
		FirstOffset:  -1,
		NextOffset:   w.mu.next,
		TailPos:      w.mu.tailPos,
		Durable:      w.mu.durable,
		Hits:         w.mu.hits,
		Misses:       w.mu.misses,
	}
	if !w.mu.idx.empty() {
		g, j := w.mu.idx.first()
		s.FirstOffset, _, _, _ = w.mu.idx.batch(g, j)
	}
	return s
}
