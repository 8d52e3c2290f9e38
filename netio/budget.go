package netio

import (
	"sync"
	"sync/atomic"

	"sluice/wire"
)

// Memory budgets. gnet cannot pause reading a socket (it reads whatever arrives and calls
// OnTraffic), so the only way to bound what a client makes the broker hold is to refuse
// the connection. The inbound budget decides which connection that is; the outbound
// budget never refuses anyone: it stops a connection from taking further requests while
// answers it has not read hold memory, and what it sends meanwhile waits in its inbound
// buffer, bounded by the inbound budget.

// refusal says why the inbound budget refused a connection.
type refusal uint8

const (
	admitted   refusal = iota
	overBudget         // the broker-wide budget (or the part of it large holdings may use)
	overConn           // the connection's own cap
)

// inboundBudget bounds the bytes all connections hold read but not yet handed to the
// handler (Config.MaxInboundTotal).
//
// The policy protects well-behaved clients. Half of the budget is kept for connections
// that hold at most smallHold bytes (1/32 of the budget: 8 MiB at the default, so the Go
// client's 4 MiB requests are small): holdings larger than that — a huge frame on its way,
// or a pipeline far past MaxInflight — share the other half, and a connection whose
// holding would take them past it is refused. A stalled or hostile client can therefore
// never take more than half of the budget, however many connections it opens, and
// ordinary requests keep being read. A small holding is refused only when the whole
// budget is in use (at the default, sixteen or more connections each holding a partial
// 8 MiB frame at the same instant). A small holding is charged as its bytes arrive (the
// pages they touch); a large frame is reserved whole from its header, so that it is
// admitted or refused at once, and large frames arriving together cannot each take part
// of the large half and all be refused half-way.
//
// Safe for concurrent use; the lock is a leaf.
type inboundBudget struct {
	limit     int64 // Config.MaxInboundTotal
	largeMax  int64 // what holdings above smallHold may take together: limit/2
	smallHold int64 // limit/32
	connMax   int64 // one connection's cap: min(Config.MaxInbound, largeMax)

	mu struct {
		sync.Mutex
		total int64 // bytes held by every connection
		large int64 // bytes held by connections holding more than smallHold
	}
	refusedBudget, refusedConn atomic.Uint64
}

func newInboundBudget(cfg *Config) *inboundBudget {
	b := &inboundBudget{limit: cfg.MaxInboundTotal, largeMax: cfg.MaxInboundTotal / 2, smallHold: cfg.MaxInboundTotal / 32}
	b.connMax = min(int64(cfg.MaxInbound), b.largeMax)
	return b
}

// largePart is what a holding of h bytes counts against largeMax.
func (b *inboundBudget) largePart(h int64) int64 {
	if h > b.smallHold {
		return h
	}
	return 0
}

// checkLocked reports whether a connection's holding may grow from `from` to `to` bytes.
func (b *inboundBudget) checkLocked(from, to int64) refusal {
	switch {
	case to <= from:
		return admitted
	case to > b.connMax:
		return overConn
	case b.mu.total-from+to > b.limit:
		return overBudget
	case to > b.smallHold && b.mu.large-b.largePart(from)+to > b.largeMax:
		return overBudget
	}
	return admitted
}

// resize moves a connection's holding from `from` to `to` bytes, or refuses the growth
// (and changes nothing). Shrinking always succeeds.
func (b *inboundBudget) resize(from, to int64) refusal {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r := b.checkLocked(from, to); r != admitted {
		return r
	}
	b.mu.total += to - from
	b.mu.large += b.largePart(to) - b.largePart(from)
	return admitted
}

// held returns the bytes charged.
func (b *inboundBudget) held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.total
}

// count records a refusal for the metrics.
func (b *inboundBudget) count(r refusal) {
	if r == overConn {
		b.refusedConn.Add(1)
	} else {
		b.refusedBudget.Add(1)
	}
}

// fetchHeadBytes is what a fetch answer's frame header, fixed fields and error text are
// reckoned to take before its records are known.
const fetchHeadBytes = 64

// outboundBudget accounts for the memory that answers hold until they are written
// (Config.MaxOutboundTotal): the bytes of a ready answer's Head and Iov (arena chunks
// that cannot be reclaimed while an answer holds them), and, for a fetch taken but not
// yet answered, its MaxBytes. Segment regions sent with sendfile hold page cache, not
// broker memory, and are not counted. All figures are atomics: Respond charges from any
// goroutine.
type outboundBudget struct {
	limit    int64 // Config.MaxOutboundTotal
	connMax  int64 // Config.MaxOutbound
	queued   atomic.Int64
	reserved atomic.Int64
	clamped  atomic.Uint64
}

// total returns the bytes charged.
func (b *outboundBudget) total() int64 { return b.queued.Load() + b.reserved.Load() }

// room returns how many more bytes of answers connection c may hold now.
func (b *outboundBudget) room(c *Conn) int64 {
	return min(b.connMax-c.out.Load(), b.limit-b.total())
}

// mayTake reports whether c may take a request of API api now. Only fetch answers can be
// large: other requests are bounded by MaxInflight. A connection that holds nothing may
// always take one fetch, so that none starves while others hold the budget.
func (b *outboundBudget) mayTake(c *Conn, api wire.APIKey) bool {
	return (api != wire.APIFetch && api != wire.APIFetchMulti) || c.out.Load() == 0 || b.room(c) > 0
}

// reserve returns what a request about to be handled should reserve of the budget. A
// fetch asking for more than its connection has room for has its MaxBytes lowered to the
// room (at least 1 byte: a fetch always answers at least one whole batch), so that what
// is reserved bounds what it may answer; the client simply fetches again.
// A multi-partition fetch is clamped the same way: its MaxBytes is the budget of the whole
// answer, plus a part header per partition.
func (b *outboundBudget) reserve(c *Conn, req *wire.Request) int64 {
	var maxBytes *uint32
	head := int64(fetchHeadBytes)
	switch f := req.Body.(type) {
	case *wire.FetchRequest:
		maxBytes = &f.MaxBytes
	case *wire.FetchMultiRequest:
		maxBytes = &f.MaxBytes
		head += int64(wire.FetchPartHeaderLen(f.Version) * len(f.Partitions))
	default:
		return 0
	}
	if room := b.room(c); int64(*maxBytes) > room {
		*maxBytes = uint32(max(room, 1))
		b.clamped.Add(1)
	}
	return head + int64(*maxBytes)
}
