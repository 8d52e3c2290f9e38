package memarena

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// raceBatch builds a self-describing batch: base and last offsets, then
// bytes derived from (buffer, base), so a reader can check what it got.
func raceBatch(buf int, base, last int64, n int) []byte {
	b := make([]byte, n)
	binary.LittleEndian.PutUint64(b, uint64(base))
	binary.LittleEndian.PutUint64(b[8:], uint64(last))
	fillPattern(b[16:], uint64(buf)<<48^uint64(base))
	return b
}

// checkRaceBatches checks that data is whole, dense batches of buffer buf,
// the first holding offset off.
func checkRaceBatches(buf int, off int64, data []byte) error {
	for first := true; len(data) > 0; first = false {
		if len(data) < 16 {
			return fmt.Errorf("torn batch of %d bytes", len(data))
		}
		base := int64(binary.LittleEndian.Uint64(data))
		last := int64(binary.LittleEndian.Uint64(data[8:]))
		n := 16 + int(last-base)*64
		if n > len(data) || (first && (base > off || last < off)) || (!first && base != off) {
			return fmt.Errorf("batch %d..%d (%d bytes) at offset %d, %d bytes left", base, last, n, off, len(data))
		}
		if !bytes.Equal(data[:n], raceBatch(buf, base, last, n)) {
			return fmt.Errorf("batch %d..%d of buffer %d has other bytes", base, last, buf)
		}
		data, off = data[n:], last+1
	}
	return nil
}

type raceHold struct {
	buf   int
	off   int64
	spans []Span
}

// TestConcurrentReadersAndReclaimer runs writers (one goroutine per pair of
// buffers, as shards do), readers that hold spans for a while, a block cache
// user and a background reclaimer at once, in an arena much smaller than the
// data. Held spans must keep their bytes until released.
func TestConcurrentReadersAndReclaimer(t *testing.T) {
	a := newTestArena(t, Config{Size: 256 * KiB, ChunkSize: 4 * KiB, SlabSize: 16 * KiB})
	const buffers = 4
	var ws [buffers]*WriteBuffer
	var next [buffers]atomic.Int64
	for i := range ws {
		ws[i] = newWB(t, a, 0)
	}
	c := newBC(t, a, 64*KiB)
	appends := 3000
	if testing.Short() {
		appends = 500
	}
	var writers, others sync.WaitGroup
	stop := make(chan struct{})
	for g := range 2 {
		writers.Go(func() { raceWriter(t, ws[2*g:2*g+2], next[2*g:2*g+2], 2*g, appends) })
	}
	for g := range 2 {
		others.Go(func() { raceReader(t, ws[:], next[:], uint64(g), stop) })
	}
	others.Go(func() { raceCacheUser(t, c, stop) })
	others.Go(func() { reclaimUntil(a, stop) })
	writers.Wait()
	close(stop)
	others.Wait()
	st := a.Stats()
	t.Logf("reclaimed %s, read hit ratio %.3f, %d ErrFull", FormatSize(st.ReclaimedBytes), st.ReadHitRatio(), st.FullErrors)
	if st.ReadHits == 0 || st.ReclaimedBytes == 0 {
		t.Fatalf("the test did not exercise reads and reclaim: %+v", st)
	}
}

func raceWriter(t *testing.T, ws []*WriteBuffer, next []atomic.Int64, firstBuf, appends int) {
	rng := rand.New(rand.NewPCG(uint64(firstBuf), 1))
	for i := 0; i < appends; {
		k := rng.IntN(len(ws))
		base := next[k].Load()
		last := base + rng.Int64N(100)
		n := 16 + int(last-base)*64
		err := ws[k].Append(raceBatch(firstBuf+k, base, last, n), base, last)
		if errors.Is(err, ErrFull) {
			ws[k].SetDurable(base - 1) // the log caught up; try again
			continue
		}
		if err != nil {
			t.Error(err)
			return
		}
		next[k].Store(last + 1)
		ws[k].SetDurable(base - rng.Int64N(300)) // persistence lags a little
		i++
	}
}

func raceReader(t *testing.T, ws []*WriteBuffer, next []atomic.Int64, seed uint64, stop chan struct{}) {
	rng := rand.New(rand.NewPCG(seed, 2))
	var held []raceHold
	defer func() {
		for _, h := range held {
			releaseRaceHold(t, h)
		}
	}()
	for {
		select {
		case <-stop:
			return
		default:
		}
		k := rng.IntN(len(ws))
		end := next[k].Load()
		if end == 0 {
			continue
		}
		off := max(0, end-1-rng.Int64N(800))
		spans, err := ws[k].Read(off, rng.IntN(16*1024), nil)
		if errors.Is(err, ErrMiss) {
			continue
		}
		if err == nil {
			err = checkRaceBatches(k, off, joinSpans(spans))
		}
		if err != nil {
			t.Error(err)
			return
		}
		held = append(held, raceHold{buf: k, off: off, spans: spans})
		if len(held) > rng.IntN(8) {
			releaseRaceHold(t, held[0])
			held = held[1:]
		}
	}
}

// releaseRaceHold checks that held spans kept their bytes and that their
// chunks were not reallocated meanwhile, then releases them.
func releaseRaceHold(t *testing.T, h raceHold) {
	if err := checkRaceBatches(h.buf, h.off, joinSpans(h.spans)); err != nil {
		t.Errorf("held spans changed: %v", err)
	}
	for i := range h.spans {
		if s := &h.spans[i]; s.a.meta(s.id).gen != s.gen {
			t.Errorf("held chunk %d was reused", s.id)
		}
	}
	ReleaseAll(h.spans)
}

func raceCacheUser(t *testing.T, c *BlockCache, stop chan struct{}) {
	rng := rand.New(rand.NewPCG(3, 3))
	for {
		select {
		case <-stop:
			return
		default:
		}
		r := blockRef{file: uint64(rng.IntN(4)), block: rng.Int64N(32)}
		if s, ok := c.Get(r.file, r.block); ok {
			if !bytes.Equal(s.Bytes(), blockData(r)) {
				t.Error("cached block has other bytes")
			}
			s.Release()
			continue
		}
		if err := c.Put(r.file, r.block, blockData(r)); err != nil && !errors.Is(err, ErrFull) {
			t.Error(err)
		}
	}
}

// placed is one appended batch, as a writer tells the persister of it.
type placed struct {
	buf             int
	pos, base, last int64
	n               int
}

// TestConcurrentPersister runs the memory-first write path at once: writers
// append and pad at segment rolls (Skip), a persister holds each run of
// batches with Range (as it would to write it to a file), checks the bytes,
// and only then advances the checkpoint; readers hold spans and a reclaimer
// runs throughout. Nothing past the checkpoint may be lost, and the arena
// must end with nothing pending.
func TestConcurrentPersister(t *testing.T) {
	a := newTestArena(t, Config{Size: 256 * KiB, ChunkSize: 4 * KiB, SlabSize: 16 * KiB})
	const buffers = 4
	var ws [buffers]*WriteBuffer
	var next [buffers]atomic.Int64
	for i := range ws {
		var err error
		if ws[i], err = a.NewWriteBufferAt(0, int64(i)*1000); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ws[i].Close)
	}
	appends := 3000
	if testing.Short() {
		appends = 500
	}
	ch := make(chan placed, 64)
	var writers, others sync.WaitGroup
	stop := make(chan struct{})
	for g := range 2 {
		writers.Go(func() { rollingWriter(t, ws[2*g:2*g+2], next[2*g:2*g+2], 2*g, appends, ch) })
	}
	persisted := make(chan int)
	go func() { persisted <- racePersister(t, ws[:], ch) }()
	for g := range 2 {
		others.Go(func() { raceReader(t, ws[:], next[:], uint64(g), stop) })
	}
	others.Go(func() { reclaimUntil(a, stop) })
	writers.Wait()
	close(ch)
	ranges := <-persisted
	close(stop)
	others.Wait()
	st := a.Stats()
	t.Logf("%d ranges persisted, reclaimed %s, %d ErrFull", ranges, FormatSize(st.ReclaimedBytes), st.FullErrors)
	if st.PendingBytes != 0 || st.ReclaimedBytes == 0 {
		t.Fatalf("after the persister caught up: %+v", st)
	}
}

// rollingWriter appends like raceWriter, pads the stream to a multiple of
// 4096 every 40 batches or so (a segment roll), and leaves the checkpoint
// to the persister: on ErrFull it waits for it.
func rollingWriter(t *testing.T, ws []*WriteBuffer, next []atomic.Int64, firstBuf, appends int, ch chan<- placed) {
	rng := rand.New(rand.NewPCG(uint64(firstBuf), 4))
	tails := make([]int64, len(ws))
	for k := range ws {
		tails[k] = ws[k].Stats().TailPos
	}
	for i := 0; i < appends; {
		k := rng.IntN(len(ws))
		if rng.IntN(40) == 0 {
			tails[k] = (tails[k] + 4095) &^ 4095
			if err := ws[k].Skip(tails[k]); err != nil {
				t.Error(err)
				return
			}
		}
		base := next[k].Load()
		last := base + rng.Int64N(100)
		n := 16 + int(last-base)*64
		err := ws[k].Append(raceBatch(firstBuf+k, base, last, n), base, last)
		if errors.Is(err, ErrFull) {
			runtime.Gosched() // the persister catches up
			continue
		}
		if err != nil {
			t.Error(err)
			return
		}
		ch <- placed{buf: firstBuf + k, pos: tails[k], base: base, last: last, n: n}
		tails[k] += int64(n)
		next[k].Store(last + 1)
		i++
	}
}

// racePersister holds each run of back-to-back batches it was told of,
// checks the bytes, releases them and advances the checkpoint. It persists
// everything whenever no news is waiting, so a writer waiting on ErrFull
// always gets room. It returns the number of ranges.
func racePersister(t *testing.T, ws []*WriteBuffer, ch <-chan placed) int {
	pending := make([][]placed, len(ws))
	var spans []Span
	ranges := 0
	persist := func(k int) {
		for len(pending[k]) > 0 {
			p := pending[k]
			i := 1
			for i < len(p) && p[i].pos == p[i-1].pos+int64(p[i-1].n) {
				i++
			}
			var err error
			end := p[i-1].pos + int64(p[i-1].n)
			if spans, err = ws[k].Range(p[0].pos, end, spans[:0]); err == nil {
				err = checkRaceBatches(k, p[0].base, joinSpans(spans))
			}
			if err != nil {
				t.Errorf("Range(%d, %d) of buffer %d: %v", p[0].pos, end, k, err)
			}
			spans = ReleaseAll(spans)
			ws[k].SetDurable(p[i-1].last)
			pending[k] = p[i:]
			ranges++
		}
	}
	for p := range ch {
		pending[p.buf] = append(pending[p.buf], p)
		if len(pending[p.buf]) >= 8 {
			persist(p.buf)
		}
		if len(ch) == 0 {
			for k := range ws {
				persist(k)
			}
		}
	}
	for k := range ws {
		persist(k)
	}
	return ranges
}

// reclaimUntil runs reclaim passes back to back until stop is closed.
func reclaimUntil(a *Arena, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
			a.Reclaim()
		}
	}
}
