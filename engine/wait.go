package engine

import "sync/atomic"

// Requests that wait on a partition: long-poll fetches (until data exists at their offset)
// and produces with acks=persisted (until the checkpoint C covers their last offset). The
// partition keeps them as plain data, with deadlines on the driver's clock, and says
// which to answer; the driver owns the requests, the timers and the sockets (raft style:
// the state machine decides, the driver acts).
//
//	driver                                  partition
//	ParkFetch(w, offset, deadline) ───────► fetches   ┐
//	ParkDurable(w, target, deadline) ─────► durables  ├─ deadline heap
//	                                                  ┘
//	DataArrived (an appender appended) ───► every fetch → ready
//	Checkpointed (C advanced) ────────────► durables with target <= C → ready
//	Expire(now) ──────────────────────────► every deadline <= now → ready
//	Release(w) (a later answer is ready) ─► w → ready
//	Shutdown ─────────────────────────────► everything → ready
//	Ready(dst) ◄──────────────────────────  the woken requests, in the order woken
//
// A woken fetch is answered with Fetch (data, or an empty answer); a woken produce with
// the partition's Window. Wake says why a request woke.

// WaitKind says what a parked request waits for.
type WaitKind uint8

// The kinds of wait.
const (
	WaitNone    WaitKind = iota // not parked
	WaitFetch                   // data past an offset
	WaitDurable                 // the checkpoint reaching an offset
)

// WakeReason says why a parked request was woken.
type WakeReason uint8

// The reasons.
const (
	WokeNone     WakeReason = iota // still parked, or never parked
	WokeData                       // data arrived (fetch) or C covers the target (durable)
	WokeDeadline                   // its deadline passed
	WokeRelease                    // the driver released it early (Release)
	WokeShutdown                   // the partition is shutting down
)

// Wait is the partition's record of one parked request. The driver's request type embeds
// it, which makes the request a Waiter: the partition hands the request itself back in
// Ready, so the driver needs no map from waits to requests.
type Wait struct {
	on       *waits // the partition's waits it is parked in; nil when not parked
	kind     WaitKind
	target   int64 // fetch: the offset asked for; durable: the offset C must cover
	deadline int64
	heapIdx  int // position in the deadline heap; meaningful while parked
	listIdx  int // position in its kind's list; meaningful while parked
	woke     WakeReason
}

// Waiter is a request that can park on a partition: any type embedding Wait.
type Waiter interface{ state() *Wait }

func (w *Wait) state() *Wait { return w }

// Parked reports whether the request is parked on a partition.
func (w *Wait) Parked() bool { return w.on != nil }

// Wake returns why the request was last woken (WokeNone while parked).
func (w *Wait) Wake() WakeReason { return w.woke }

// waits holds a partition's parked requests.
type waits struct {
	// fetchesParked mirrors len(fetches) for readers on other goroutines: park's caller
	// raises it (before checking whether to park), wake lowers it.
	fetchesParked *atomic.Int64
	fetches       []Waiter // long polls; all wake together when data arrives
	durables      []Waiter // produces waiting for C
	heap          []Waiter // every parked request, a min-heap by deadline
	ready         []Waiter // woken, waiting for the driver to take them
}

// park records w; it must not be parked already.
func (ws *waits) park(w Waiter, kind WaitKind, target, deadline int64) {
	st := w.state()
	if st.kind != WaitNone {
		panic("BUG: engine: a request parked twice")
	}
	st.on, st.kind, st.target, st.deadline, st.woke = ws, kind, target, deadline, WokeNone
	list := &ws.fetches
	if kind == WaitDurable {
		list = &ws.durables
	}
	st.listIdx = len(*list)
	*list = append(*list, w)
	st.heapIdx = len(ws.heap)
	ws.heap = append(ws.heap, w)
	ws.up(st.heapIdx)
}

// wake moves a parked w to ready with reason why.
func (ws *waits) wake(w Waiter, why WakeReason) {
	st := w.state()
	list := &ws.fetches
	if st.kind == WaitDurable {
		list = &ws.durables
	}
	removeAt(list, st.listIdx)
	if st.kind == WaitFetch && ws.fetchesParked != nil {
		ws.fetchesParked.Add(-1)
	}
	ws.removeHeap(st.heapIdx)
	st.on, st.kind, st.woke = nil, WaitNone, why
	ws.ready = append(ws.ready, w)
}

// removeAt removes the element at i by moving the last one into its place.
func removeAt(list *[]Waiter, i int) {
	l := *list
	last := len(l) - 1
	if i != last {
		l[i] = l[last]
		l[i].state().listIdx = i
	}
	l[last] = nil
	*list = l[:last]
}

// wakeAll wakes every request of a list (the list is emptied; wake edits it).
func (ws *waits) wakeAll(list *[]Waiter, why WakeReason) {
	for len(*list) > 0 {
		ws.wake((*list)[len(*list)-1], why)
	}
}

// wakeBelow wakes the waits of a list whose target is below end: fetches for offsets
// that exist now (end the log's end), durable produces whose last offset C covers (end
// C + 1).
func (ws *waits) wakeBelow(list *[]Waiter, end int64) {
	for i := 0; i < len(*list); {
		if w := (*list)[i]; w.state().target < end {
			ws.wake(w, WokeData) // moves the last element to i: look at i again
		} else {
			i++
		}
	}
}

// expire wakes every request whose deadline is at or before now.
func (ws *waits) expire(now int64) {
	for len(ws.heap) > 0 && ws.heap[0].state().deadline <= now {
		ws.wake(ws.heap[0], WokeDeadline)
	}
}

// nextDeadline returns the earliest deadline of a parked request.
func (ws *waits) nextDeadline() (int64, bool) {
	if len(ws.heap) == 0 {
		return 0, false
	}
	return ws.heap[0].state().deadline, true
}

// The deadline heap: a plain binary min-heap that keeps each element's index in it.

func (ws *waits) less(i, j int) bool {
	return ws.heap[i].state().deadline < ws.heap[j].state().deadline
}

func (ws *waits) swap(i, j int) {
	h := ws.heap
	h[i], h[j] = h[j], h[i]
	h[i].state().heapIdx = i
	h[j].state().heapIdx = j
}

func (ws *waits) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !ws.less(i, parent) {
			return
		}
		ws.swap(i, parent)
		i = parent
	}
}

func (ws *waits) down(i int) {
	n := len(ws.heap)
	for {
		least, l, r := i, 2*i+1, 2*i+2
		if l < n && ws.less(l, least) {
			least = l
		}
		if r < n && ws.less(r, least) {
			least = r
		}
		if least == i {
			return
		}
		ws.swap(i, least)
		i = least
	}
}

func (ws *waits) removeHeap(i int) {
	last := len(ws.heap) - 1
	if i != last {
		ws.swap(i, last)
	}
	ws.heap[last] = nil
	ws.heap = ws.heap[:last]
	if i != last {
		ws.down(i)
		ws.up(i)
	}
}
