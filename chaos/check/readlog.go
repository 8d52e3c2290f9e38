package check

import "iter"

// readLog is a run's reads in the order they were recorded, kept in chunks of readChunk
// so that recording one never copies the ones before it. A ten-minute run makes tens of
// millions of reads (every sampler consumer reads from the oldest record again); before
// repeats were dropped (repeats.go) all were recorded, and held in one slice, each
// growth copied up to a gigabyte under the history's lock, which every
// writer and consumer of the harness waits on, and stalled the whole load for seconds:
// the chaos runs of seed 71 reported a kill's recovery of 2.2-3.75 s at the same point of
// the run each time (a goroutine dump of the stall showed every writer and the live
// consumer waiting for that lock).
type readLog struct {
	chunks [][]Read
	n      int
}

// readChunk is the reads one chunk holds (2.5 MiB of them). A chunk starts small and
// grows by append up to that (a copy of at most one chunk): most histories of the tests
// hold a few reads.
const readChunk = 1 << 16

// add appends r.
func (l *readLog) add(r Read) {
	if l.n%readChunk == 0 {
		l.chunks = append(l.chunks, make([]Read, 0, 16))
	}
	last := &l.chunks[len(l.chunks)-1]
	*last = append(*last, r)
	l.n++
}

// len returns how many reads were recorded.
func (l *readLog) len() int { return l.n }

// all yields each read with its index, in the order recorded.
func (l *readLog) all() iter.Seq2[int, Read] {
	return func(yield func(int, Read) bool) {
		i := 0
		for _, c := range l.chunks {
			for _, r := range c {
				if !yield(i, r) {
					return
				}
				i++
			}
		}
	}
}
