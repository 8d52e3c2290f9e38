package check

import "sync"

// Ack is the strongest outcome a producer saw for a record.
type Ack uint8

const (
	// AckUnknown: sent, and the producer never learned the outcome (a timeout, a crash).
	AckUnknown Ack = iota
	// AckFailed: the producer was told the record was not appended.
	AckFailed
	// AckAccepted: the broker appended it (to memory; not durable yet).
	AckAccepted
	// AckPersisted: the partition's checkpoint C covered it.
	AckPersisted
)

var ackNames = [...]string{"unknown", "failed", "accepted", "persisted"}

// String returns the ack's name as the report prints it.
func (a Ack) String() string {
	if int(a) < len(ackNames) {
		return ackNames[a]
	}
	return "ack?"
}

// Read is one record a consumer read.
type Read struct {
	Partition int
	Offset    int64
	// ID is what the value says; meaningless unless Valid.
	ID ID
	// Valid is false for a value DecodeValue refused (never written by the harness, or
	// damaged).
	Valid bool
	// Durable: the fetch answer that carried the record had the partition's checkpoint C
	// at or past its offset.
	Durable bool
}

// ReadOf decodes a value read at partition and offset into a Read.
func ReadOf(partition int, offset int64, value []byte, durable bool) Read {
	id, err := DecodeValue(value)
	return Read{Partition: partition, Offset: offset, ID: id, Valid: err == nil, Durable: durable}
}

// History is what a run's producers sent and its consumers read. Its methods are safe
// from any goroutine.
type History struct {
	mu struct {
		sync.Mutex
		sends   map[ID]Ack
		reads   readLog
		seen    repeats // what reads at or below C found, to drop their repeats
		repeats int     // reads dropped as repeats
		damaged map[ID]bool
		placed  map[ID]where // where a producer's answer said a record went, when it said
		cuts    []cut
	}
}

// cut is a partition's tail destroyed by an injected fault: reads of its positions
// recorded before it (the first `reads` reads) no longer say what the partition holds.
type cut struct {
	part  int
	from  int64
	reads int
}

// NewHistory returns an empty history.
func NewHistory() *History {
	h := &History{}
	h.mu.sends = map[ID]Ack{}
	h.mu.damaged = map[ID]bool{}
	h.mu.placed = map[ID]where{}
	return h
}

// Sent records that id was sent and reached ack. A record's outcome only gets stronger:
// accepted after persisted stays persisted, and failed never replaces an acknowledgement.
func (h *History) Sent(id ID, ack Ack) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if old, ok := h.mu.sends[id]; !ok || ack > old {
		h.mu.sends[id] = ack
	}
}

// Placed records where a producer's answer put id (a partition and an offset). It only
// adds detail to what the report says about a record that goes missing: a lost record's
// line names its place and what was read there instead.
func (h *History) Placed(id ID, partition int, offset int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.placed[id] = where{partition, offset}
}

// Read records a read, or counts it only when it repeats what the last read at or below
// C of its position found (repeats.go).
func (h *History) Read(r Read) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mu.seen.repeat(r) {
		h.mu.repeats++
		return
	}
	h.mu.reads.add(r)
}

// Damaged records that the harness destroyed id in the files (a bit flip or a cut at or
// before it, in its partition): if it is never read, it counts as damaged, not lost.
func (h *History) Damaged(id ID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.damaged[id] = true
}

// Cut records that the harness destroyed partition's records from offset from on
// (damage, then the broker's or the operator's cut): the partition may hold other
// records at those offsets afterwards, so earlier reads of them are superseded.
func (h *History) Cut(partition int, from int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.cuts = append(h.mu.cuts, cut{part: partition, from: from, reads: h.mu.reads.len()})
	h.mu.seen.forget(partition, from)
}

// Len returns how many records were sent and how many reads were made (repeats
// included).
func (h *History) Len() (sent, reads int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.mu.sends), h.mu.reads.len() + h.mu.repeats
}
