package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"time"

	"sluice/batch"
	"sluice/wire"
)

// fetcher reads some of the consumer's partitions served by one broker (a lane: see
// fetchLanes): a goroutine that keeps fetch_multi requests for all of them in flight,
// sending the next one as soon as an answer's part table has arrived (readEarly), while
// its records are still on their way, and in any case before the application looks at
// the records. So the broker never waits for the application nor for a round trip, a
// quiet partition never holds up a busy one (the broker answers as soon as any has
// records), and the application iterates one answer while the next one is on the wire.
//
// Memory: two answer buffers per fetcher, each one frame of at most the byte budget
// (FetchMaxBytes, plus part headers and a batch larger than the budget): one being read,
// one the application iterates (answers travel through the consumer's ready channel and
// come back on free). A fetcher does not read an answer until it has a free buffer.
//
// The fetcher owns its fetch positions (pos); the application's cursors are the
// consumer's. On any failure the fetcher delivers an answer with the error and ends; the
// consumer then starts that lane again from its cursors while the others go on
// (consumer_lanes.go), or, for a failure that concerns them all, stops every fetcher and
// starts new ones (Poll's retry).
type fetcher struct {
	c     *Consumer
	addr  string
	parts []*cpart
	pos   []int64 // next offset to fetch, per part
	rot   int     // rotation of the request's partition order, for fairness
	nc    net.Conn
	// br reads nc (made on the first read): a small answer, its header, part table and
	// records, comes in one read(2) instead of three; the records of a large one bypass
	// it, read straight into the answer's buffer (bufio does so for reads larger than
	// its buffer once it is empty).
	br   *bufio.Reader
	free chan *answer // buffers the application gave back; capacity answerBuffers
	// ctx ends (quit closes) when the consumer stops the fetcher (cancel, stopLocked).
	ctx    context.Context
	cancel context.CancelFunc
	quit   <-chan struct{}
	// fresh: the lane has delivered no answer yet; its first resets its partitions'
	// backoff (cpart.backoff, consumer_lanes.go), however it was started (a revive, a
	// regate, a restart of every lane).
	fresh bool
	req   wire.FetchMultiRequest
	resp  wire.Response
	body  wire.FetchMultiResponse // f.resp's body, of f.version
	wbuf  []byte
	id    uint32 // of the last request sent
	// version is the fetch_multi version asked (2, or older for a broker that predates
	// it). With version 2 a lane sends its next request as soon as it has read an
	// answer's part table (early), before the records; with version 1 only a lane of one
	// partition does: see readEarly.
	version uint16
	early   bool            // the request of the next answer is sent already
	peek    []wire.PartNext // the part table of the answer being read (readEarly)
	seen    []bool          // per part: taken from the answer being taken (fetch, take)
	slots   []int32         // position in parts by partition id (index); made on first use
	// stale is set when an answer's records did not end at its next offset, after the
	// request for the next answer went out from there: that answer is handed over (its
	// records are whole batches, checked by the iterator like any), and the fetcher
	// then ends with stale instead of reading the next one.
	stale error
}

// answer is one fetch answer handed to the application: the parts of a fetch_multi
// answer (or one part, for a single-partition fetch), aliasing buf.
type answer struct {
	f     *fetcher
	buf   []byte
	parts []answerPart
	err   error
}

// answerPart is one partition's records in an answer. skipTo, when >= 0, moves the
// partition's cursor first (retention removed what it wanted, or it is past the end).
type answerPart struct {
	p       *cpart
	records []byte
	// verified is how many bytes at the start of records are batches the fetcher checked
	// (verifyBatches): the iterator does not compute their CRC again.
	verified   int
	skipTo     int64
	checkpoint int64 // the partition's C with these records (Consumer.Checkpoint)
}

// answerBuffers is how many buffers a fetcher owns.
const answerBuffers = 2

// fetchLanes is how many fetchers, each with its own connection and request in flight,
// share the partitions of one broker (when it serves at least that many): one request
// in flight leaves the broker idle for a round trip (and a hop between its shards) after
// every answer, and the consumer iterating one answer while the next is on the wire
// covers only the client's side of that. Two requests in flight cover it for the broker
// too. Separate connections, because a connection's answers come back in request order:
// one lane's long poll would hold up the other's records.
const fetchLanes = 2

// startFetchers starts the fetchers for the consumer's partitions, from their cursors:
// fetchLanes per broker, each reading every fetchLanes-th of its partitions. A partition
// the metadata names no broker for (moving, or new and not placed yet) is left out
// (p.unrouted) until a refresh gives it one (followAddresses), so that it never holds up
// the others, and so is one whose start at a time is not known yet (p.timeStart); with
// no partition to fetch at all the answer is errNoAddress (retried after a refresh).
// Each fetcher dials its broker itself (run): a broker that is down fails its own lanes
// only (consumer_lanes.go), and no Poll waits for a dial while other lanes have records.
func (c *Consumer) startFetchers() error {
	var parts []*cpart
	for _, p := range c.parts {
		p.unrouted = !p.held && (p.addr == "" || p.timeStart)
		if !p.held && !p.unrouted { // else it waits for its gate (consumer_layout.go), or for an address
			parts = append(parts, p)
		}
	}
	fs := c.lanes(parts)
	if len(fs) == 0 {
		return fmt.Errorf("cannot fetch %s: %w", c.topic, errNoAddress)
	}
	// Room for every buffer of the first fetchers: they rarely wait handing over (lanes
	// started later may; every hand-over also watches quit, so stopping never waits for
	// the application).
	ready := make(chan *answer, answerBuffers*len(fs))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed() {
		return ErrClosed
	}
	c.ready = ready
	c.runLocked(fs)
	return nil
}

// lanes makes the fetchers of parts, from their cursors: fetchLanes per broker, each
// reading every fetchLanes-th of the broker's partitions.
func (c *Consumer) lanes(parts []*cpart) []*fetcher {
	type lane struct {
		addr string
		i    int
	}
	var fs []*fetcher
	byLane := map[lane]*fetcher{}
	seen := map[string]int{} // partitions so far per broker
	for _, p := range parts {
		k := lane{p.addr, seen[p.addr] % fetchLanes}
		seen[p.addr]++
		f := byLane[k]
		if f == nil {
			// The rotation starts anywhere: a partition the budget leaves out (its next
			// batch larger than what is left) is read when its turn comes first, and a
			// lane started again and again (regates) must not always begin it last.
			f = &fetcher{c: c, addr: p.addr, free: make(chan *answer, answerBuffers),
				version: c.fetchVersion(p.addr), rot: rand.Int(), fresh: true}
			f.ctx, f.cancel = context.WithCancel(context.Background())
			f.quit = f.ctx.Done()
			for range answerBuffers {
				f.free <- &answer{f: f}
			}
			byLane[k] = f
			fs = append(fs, f)
		}
		f.parts = append(f.parts, p)
		f.pos = append(f.pos, p.cur.next)
	}
	return fs
}

// runLocked adds fs to the running fetchers and starts their goroutines. Requires c.mu.
func (c *Consumer) runLocked(fs []*fetcher) {
	c.fetchers = append(c.fetchers, fs...)
	// Close reads mu.fetchers: a copy of its own, never sharing c.fetchers' array.
	c.mu.fetchers = slices.Clone(c.fetchers)
	for _, f := range fs {
		c.fwg.Add(1)
		go f.run(c.ready)
	}
}

// stopFetchers stops the fetchers and waits for their goroutines; answers not yet taken
// are dropped, and so are the lanes waiting to start again (consumer_lanes.go): the next
// fetchers start every lane.
func (c *Consumer) stopFetchers() {
	c.mu.Lock()
	c.stopFetchersLocked()
	c.mu.Unlock()
	c.fwg.Wait()
	c.fetchers, c.ready, c.ans = nil, nil, nil
	c.down, c.revived = downLanes{}, nil
}

// stopFetchersLocked closes the fetchers' connections and quit channels: their
// goroutines end soon after. Requires c.mu.
func (c *Consumer) stopFetchersLocked() {
	for _, f := range c.mu.fetchers {
		f.stopLocked()
	}
	c.mu.fetchers = nil
}

// stopLocked ends the fetcher: a dial in progress, a read or a hand-over returns. Requires
// c.mu (which guards f.nc against connect).
func (f *fetcher) stopLocked() {
	f.cancel()
	if f.nc != nil {
		f.nc.Close()
	}
}

// run is the fetcher goroutine: dial, then request, read, hand over, until the
// connection fails or the consumer stops the fetcher.
func (f *fetcher) run(ready chan<- *answer) {
	defer f.c.fwg.Done()
	dialErr := f.connect()
	for {
		var a *answer
		select {
		case a = <-f.free:
		case <-f.quit:
			return
		}
		switch {
		case dialErr != nil:
			a.parts, a.err = a.parts[:0], dialErr
		case f.stale != nil:
			a.parts, a.err = a.parts[:0], f.stale
		default:
			a.err = f.fetch(a)
		}
		select {
		case ready <- a:
		case <-f.quit:
			return
		}
		if a.err != nil {
			return
		}
	}
}

// connect dials the fetcher's broker; a stop (f.quit) ends a dial in progress.
func (f *fetcher) connect() error {
	nc, err := dial(f.ctx, &f.c.cfg, f.addr)
	if err != nil {
		return fmt.Errorf("cannot fetch %s from %s: %w", f.c.topic, f.addr, err)
	}
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if f.ctx.Err() != nil { // stopped while dialing: stopLocked did not see nc
		nc.Close()
		return fmt.Errorf("cannot fetch %s from %s: %w", f.c.topic, f.addr, net.ErrClosed)
	}
	f.nc = nc
	return nil
}

// fetch sends the next request, unless it went out early, and reads its answer into a.
func (f *fetcher) fetch(a *answer) error {
	a.parts = a.parts[:0]
	// A broker owes this answer within the long poll's wait (the request went out at the
	// latest now); one that does not answer by then and the slack is hung (paused, or
	// its host gone without a reset): the lane fails and starts again, after asking the
	// metadata, where its partitions are now. One deadline per answer, not per read.
	limit := f.c.cfg.fetchTimeout()
	f.nc.SetDeadline(time.Now().Add(limit))
	if !f.early {
		if err := f.send(); err != nil {
			return err
		}
	}
	f.early = false
	if err := f.read(a, f.id); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			f.c.admin.shun(f.addr) // the lane asks the metadata next: not this broker
			err = fmt.Errorf("no answer within %v: %w", limit, err)
		}
		return fmt.Errorf("cannot fetch %s from %s: %w", f.c.topic, f.addr, err)
	}
	if err := f.resp.Err(); err != nil {
		if wire.CodeOf(err) == wire.CodeUnsupportedVersion && f.version > 0 {
			return &oldBrokerError{addr: f.addr, version: f.version}
		}
		return fmt.Errorf("cannot fetch %s from %s: %w", f.c.topic, f.addr, err)
	}
	body, _ := f.resp.Body.(*wire.FetchMultiResponse)
	if body == nil || len(body.Parts) != len(f.parts) {
		return fmt.Errorf("cannot fetch %s from %s: answer of the wrong shape", f.c.topic, f.addr)
	}
	// Each partition asked exactly once: as many parts as asked (above), none twice
	// (take).
	f.seen = append(f.seen[:0], make([]bool, len(f.parts))...)
	for i := range body.Parts {
		if err := f.take(a, &body.Parts[i]); err != nil {
			return err
		}
	}
	return nil
}

// send sends the next request.
func (f *fetcher) send() error {
	f.request()
	if _, err := f.nc.Write(f.wbuf); err != nil {
		return fmt.Errorf("cannot fetch %s from %s: %w", f.c.topic, f.addr, err)
	}
	return nil
}

// request encodes the fetch_multi request for every part, the order rotated by one each
// time so that the budget does not always go to the same partition first.
func (f *fetcher) request() {
	cfg := &f.c.cfg
	f.req = wire.FetchMultiRequest{Topic: f.c.topicB, MaxWaitMs: uint32(cfg.fetchWait.Milliseconds()),
		MaxBytes: uint32(cfg.fetchBytes), Partitions: f.req.Partitions[:0]}
	n := len(f.parts)
	f.rot = (f.rot + 1) % n
	for k := range n {
		i := (f.rot + k) % n
		f.req.Partitions = append(f.req.Partitions, wire.FetchMultiPartition{Partition: uint32(f.parts[i].id), Offset: f.pos[i]})
	}
	f.id++
	start := 0
	f.wbuf = wire.AppendRequestHeader(f.wbuf[:0], wire.RequestHeader{APIKey: wire.APIFetchMulti,
		APIVersion: f.version, RequestID: f.id})
	f.wbuf = f.req.AppendTo(f.wbuf)
	wire.FinishFrame(f.wbuf, start)
}

// read reads exactly one response frame, the answer to request id, into a.buf (no byte
// of a later frame: each buffer holds one answer) and decodes it into f.resp, aliasing
// a.buf.
func (f *fetcher) read(a *answer, id uint32) error {
	if f.br == nil {
		f.br = bufio.NewReaderSize(f.nc, fetchReadBuf)
	}
	a.buf = grow0(a.buf, wire.ResponseHeaderSize)
	if _, err := io.ReadFull(f.br, a.buf); err != nil {
		return err
	}
	size, hdr, err := wire.PeekResponse(a.buf, f.maxFrame())
	if err != nil && !errors.Is(err, wire.ErrShort) {
		return err
	}
	if hdr.RequestID != id || hdr.APIKey != wire.APIFetchMulti { // before readEarly acts on it
		return fmt.Errorf("cannot match answer: id %d of %v, want id %d of %v", hdr.RequestID, hdr.APIKey, id, wire.APIFetchMulti)
	}
	a.buf = growKeep(a.buf, size)
	got, err := f.readEarly(hdr, a.buf)
	if err != nil {
		return err
	}
	if _, err := io.ReadFull(f.br, a.buf[got:]); err != nil {
		return err
	}
	f.body.Version = f.version
	f.resp.Body = &f.body // the layout of f.version (an error answer may have cleared it)
	if _, err := f.resp.Decode(a.buf, f.maxFrame()); err != nil {
		return fmt.Errorf("cannot decode answer: %w", err)
	}
	return nil
}

// maxFrame is the largest answer the lane takes: the client's limit, or what the
// protocol allows its request, whichever is larger. A budget of at most batch.MaxSize
// (newCfg) and the first partition's one batch beyond it bound the records by one
// batch.MaxSize; the part table grows with the lane's partitions (4096 parts, about
// 160 KiB, would not fit the 64 KiB DefaultMaxFrame keeps beside a batch).
func (f *fetcher) maxFrame() int {
	return max(f.c.cfg.maxFrame, batch.MaxSize+wire.FetchMultiTableSize(len(f.parts))+64<<10)
}

// readEarly is where a lane keeps two requests in flight. It reads the frame (of which
// buf holds the header, hdr) up to the end of its part table (version 2: every part's
// fields come before the first records), takes each part's next offset from there and
// sends the next request at once, while the records are still on their way: the broker
// starts on the next answer (or parks it) instead of waiting a round trip after each
// one. It returns how many bytes of buf are read. It reads nothing more, and sends
// nothing, with version 0, with version 1 for a lane of several partitions (their part
// headers are spread through the frame, each after the previous one's records), or when
// the frame is an error, has a part with an error code, or is too short.
//
// Each next offset is checked against its records once the frame is whole (take): an
// answer whose records end elsewhere fails the fetcher, and the consumer starts again
// from its own cursors.
func (f *fetcher) readEarly(hdr wire.ResponseHeader, buf []byte) (int, error) {
	got, k := wire.ResponseHeaderSize, len(f.parts)
	table := wire.FetchMultiTableSize(k)
	if f.version < 1 || f.version == 1 && k != 1 || len(buf) < table {
		return got, nil
	}
	if _, err := io.ReadFull(f.br, buf[got:table]); err != nil {
		return got, err
	}
	var ok bool
	f.peek, ok = wire.PeekNextOffsets(hdr, buf[got:table], k, f.peek[:0])
	if !ok {
		return table, nil
	}
	// f.pos holds the offsets this answer was asked for: a part moves past them by its
	// records, or stays. Anything else waits for the whole frame (take checks it).
	for _, p := range f.peek {
		i := f.index(p.Partition)
		if i < 0 || (p.RecordsLen > 0) != (p.NextOffset > f.pos[i]) || p.NextOffset < f.pos[i] {
			return table, nil
		}
	}
	for _, p := range f.peek {
		f.pos[f.index(p.Partition)] = p.NextOffset
	}
	if err := f.send(); err != nil {
		return table, err
	}
	f.early = true
	f.c.earlyFetches.Add(1)
	return table, nil
}

// fetchReadBuf is the size of a fetcher's read buffer (fetcher.br): room for a small
// answer whole; larger records go past it.
const fetchReadBuf = 32 << 10

// grow0 returns b resized to n bytes, contents not kept.
func grow0(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n, max(n, minReadBuf))
	}
	return b[:n]
}

// growKeep returns b resized to n bytes, keeping its contents. It at least doubles the
// capacity when it grows, so that answers of slowly rising sizes do not each allocate.
func growKeep(b []byte, n int) []byte {
	if cap(b) < n {
		nb := make([]byte, n, max(n, 2*cap(b)))
		copy(nb, b)
		return nb
	}
	return b[:n]
}

// take applies one part: records move the fetch position past their last batch; an
// offset out of range moves it into the partition's range, or, when the offset is in
// range but below what the broker holds locally (HDFS in distributed mode), reads that
// partition once with the single-partition fetch, which reads HDFS.
func (f *fetcher) take(a *answer, part *wire.FetchPart) error {
	i := f.index(part.Partition)
	if i < 0 {
		return fmt.Errorf("cannot fetch %s from %s: answer for partition %d not asked for", f.c.topic, f.addr, part.Partition)
	}
	if f.seen[i] {
		return fmt.Errorf("cannot fetch %s from %s: answer for partition %d twice", f.c.topic, f.addr, part.Partition)
	}
	f.seen[i] = true
	p := f.parts[i]
	switch part.Code {
	case wire.CodeNone:
		if part.Records != nil {
			after, verified := verifyBatches(part.Records)
			if f.version >= 1 && after != part.NextOffset && f.stale == nil {
				f.stale = fmt.Errorf("cannot fetch %s/%d from %s: the answer's next offset %d disagrees with its records, which end at %d",
					f.c.topic, p.id, f.addr, part.NextOffset, after)
			}
			a.parts = append(a.parts, answerPart{p: p, records: part.Records, verified: verified, skipTo: -1,
				checkpoint: part.Checkpoint})
			f.pos[i] = max(f.pos[i], after)
		}
		return nil
	case wire.CodeOffsetOutOfRange:
		next := min(max(f.pos[i], part.LogStartOffset), part.HighWatermark)
		if next == f.pos[i] && next < part.HighWatermark {
			return &singleFetchError{p: p, offset: f.pos[i]}
		}
		f.pos[i] = next
		a.parts = append(a.parts, answerPart{p: p, skipTo: next, checkpoint: part.Checkpoint})
		return nil
	}
	err := &wire.ProtocolError{Code: part.Code, Msg: part.Code.Text()}
	return fmt.Errorf("cannot fetch %s/%d at %d: %w", f.c.topic, p.id, f.pos[i], err)
}

// maxOldBrokers bounds the brokers a consumer remembers as predating the newest
// fetch_multi version (beyond it, such a broker is asked for the newest again, with
// backoff, until the caller's context ends).
const maxOldBrokers = 256

// newestFetchVersion is the fetch_multi version a consumer asks for: 2, the part table first
// (every lane keeps two requests in flight). A broker that refuses it is asked for 1
// (a lane of one partition keeps two in flight), then 0.
const newestFetchVersion = 2

// fetchVersion returns the fetch_multi version to ask broker addr for: the newest, or
// one below the last it refused.
func (c *Consumer) fetchVersion(addr string) uint16 {
	if v, ok := c.oldFetch[addr]; ok {
		return v
	}
	return newestFetchVersion
}

// noteOldBroker remembers the broker of an oldBrokerError and the version below the one
// it refused, so that its next fetchers ask for that.
func (c *Consumer) noteOldBroker(err error) {
	var ob *oldBrokerError
	if !errors.As(err, &ob) || ob.version == 0 {
		return
	}
	if _, known := c.oldFetch[ob.addr]; !known && len(c.oldFetch) >= maxOldBrokers {
		return
	}
	if c.oldFetch == nil {
		c.oldFetch = map[string]uint16{}
	}
	c.oldFetch[ob.addr] = ob.version - 1
}

// oldBrokerError says that a broker refused a fetch_multi version (it predates it, and
// closed the connection): the consumer reads it with the version below from then on.
type oldBrokerError struct {
	addr    string
	version uint16 // the version refused
}

func (e *oldBrokerError) Error() string {
	return fmt.Sprintf("broker %s does not know fetch_multi version %d: reading it with version %d", e.addr, e.version, e.version-1)
}

// singleFetchError says that a partition's offset is in its range but the broker could
// not serve it with fetch_multi (data only HDFS holds): the consumer reads it once with
// fetch, then starts its fetchers again.
type singleFetchError struct {
	p      *cpart
	offset int64
}

func (e *singleFetchError) Error() string {
	return fmt.Sprintf("offset %d of partition %d is served by the single-partition fetch only", e.offset, e.p.id)
}

// index returns the position of partition id in f.parts, -1 when absent. Every part of
// every answer is looked up (readEarly, take), so the lookup is a table, not a search
// of f.parts: a search made an answer cost k² comparisons, 6.7 ms for a lane of 2 048
// partitions (BenchmarkFetcherTakeWide; 0.7 µs for 16).
func (f *fetcher) index(id uint32) int {
	if f.slots == nil {
		f.slots = slotsOf(f.parts)
	}
	if uint64(id) >= uint64(len(f.slots)) {
		return -1
	}
	return int(f.slots[id])
}

// slotsOf returns the table of index: position in parts by partition id, -1 for the ids
// in between. Partition ids are below wire.MaxPartitions, so the table is at most
// 256 KiB, and a lane's is as long as its largest id.
func slotsOf(parts []*cpart) []int32 {
	n := 0
	for _, p := range parts {
		n = max(n, p.id+1)
	}
	slots := make([]int32, n)
	for i := range slots {
		slots[i] = -1
	}
	for i, p := range parts {
		slots[p.id] = int32(i)
	}
	return slots
}

// verifyBatches walks records, whole batches back to back, and returns the offset after
// the last whole one (0 when none can be parsed: the iterator reports the damage) and how
// many bytes from the start are batches whose CRC matches (batch.Check). The iterator
// checks nothing again in that prefix, and checks (and reports) the first batch after it.
//
// The check runs here, on the fetcher's goroutine, right after the read that brought the
// bytes, rather than in Next on the application's: the application iterates one answer
// while the fetcher reads and checks the next, so on two cores the two overlap, where
// before the application's goroutine did both. On a host whose CRC-32C runs at 4 GB/s
// (BENCHMARKS.md, 2026-12-02), checking was about half of a consumer's CPU from memory.
func verifyBatches(records []byte) (next int64, verified int) {
	good := true
	for pos := 0; pos < len(records); {
		h, err := batch.ParseHeader(records[pos:])
		if err != nil || h.Size() > len(records)-pos {
			break
		}
		end := pos + h.Size()
		if good {
			if _, err := batch.Check(records[pos:end]); err != nil {
				good = false
			} else {
				verified = end
			}
		}
		next = h.LastOffset() + 1
		pos = end
	}
	return next, verified
}
