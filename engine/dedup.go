package engine

import (
	"math"

	"sluice/batch"
)

// dedupWindow is how many recent batches per producer are remembered with their offsets,
// so a resend of any of them is answered with the offsets it got the first time.
const dedupWindow = 8

// appended is one batch a producer got into the log.
type appended struct {
	firstSeq, lastSeq int32
	base, last        int64
}

// producerState is what a partition remembers of one producer: its last batches, newest
// last. A producer whose state is gone (evicted by a restart beyond the rebuild horizon)
// starts over at whatever sequence it sends.
type producerState struct {
	recent [dedupWindow]appended
	n      int // valid entries in recent, at most dedupWindow
}

func (s *producerState) lastSeq() int32 { return s.recent[s.n-1].lastSeq }

func (s *producerState) add(a appended) {
	if s.n == dedupWindow {
		copy(s.recent[:], s.recent[1:])
		s.n--
	}
	s.recent[s.n] = a
	s.n++
}

// seqCheck is the verdict on a batch's sequence.
type seqCheck int

const (
	seqNew       seqCheck = iota // append it
	seqDuplicate                 // already in the log; answer with its offsets
	seqOld                       // already in the log, older than the window: acknowledge
	seqGap                       // does not continue the sequence: refuse
)

// check classifies the batch h of a producer with state s (nil if unknown). A batch
// whose sequences wrap (seqWraps) is a gap whatever the state.
func (s *producerState) check(h *batch.Header) (seqCheck, appended) {
	if seqWraps(h) {
		return seqGap, appended{}
	}
	if s == nil || s.n == 0 {
		return seqNew, appended{}
	}
	first, last := h.BaseSequence, h.BaseSequence+int32(h.Count)-1
	if first == s.lastSeq()+1 {
		return seqNew, appended{}
	}
	for i := s.n - 1; i >= 0; i-- {
		if r := s.recent[i]; r.firstSeq == first && r.lastSeq == last {
			return seqDuplicate, r
		}
	}
	if last < s.recent[0].firstSeq && s.lastSeq() != math.MaxInt32 {
		return seqOld, appended{}
	}
	// A producer whose sequence reached 2^31-1 has no new batch left: one with a low
	// sequence is a client wrapping around, whose records an "old resend" verdict would
	// drop.
	return seqGap, appended{}
}

// seqWraps reports whether the batch's sequences run past 2^31-1. A sequence does not
// wrap here: such a batch would leave its producer a negative last sequence, and every
// later batch of the producer would be taken for an old one, acknowledged and dropped.
// sluice's client starts a new session before that (client/window.go).
func seqWraps(h *batch.Header) bool { return int64(h.BaseSequence)+int64(h.Count)-1 > math.MaxInt32 }

// idempotent reports whether a batch takes part in deduplication.
func idempotent(h *batch.Header) bool { return h.ProducerID != 0 && h.BaseSequence >= 0 }
