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
// whose sequences reach the end (seqWraps) is a gap whatever the state.
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
	if last < s.recent[0].firstSeq && !s.exhausted() {
		return seqOld, appended{}
	}
	return seqGap, appended{}
}

// seqWraps reports whether the batch's sequences reach 2^31-1, the end: a producer's
// sequences run from 0 to 2^31-2 and do not wrap. A batch that ran past the end would
// leave its producer a negative last sequence, and a producer at the end would have no
// next batch: either way its later batches, with low sequences, would be taken for old
// resends, acknowledged and dropped. Ending one short of the largest int32 leaves a
// producer's last batch resendable like any other. sluice's client takes a new producer
// id before that (client/window.go).
func seqWraps(h *batch.Header) bool { return int64(h.BaseSequence)+int64(h.Count)-1 >= math.MaxInt32 }

// exhausted reports whether the producer's last sequence is one that seqWraps refuses now
// but a log written before the rule may hold (wrapped below 0, or at 2^31-1): no batch of
// it is new, and one with a low sequence is a client wrapping around, not an old resend.
func (s *producerState) exhausted() bool { l := s.lastSeq(); return l < 0 || l == math.MaxInt32 }

// idempotent reports whether a batch takes part in deduplication.
func idempotent(h *batch.Header) bool { return h.ProducerID != 0 && h.BaseSequence >= 0 }
