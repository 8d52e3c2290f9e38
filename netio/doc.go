// Package netio is the broker's network layer on gnet event loops: it reads
// length-prefixed request frames, hands each decoded request to a Handler, and writes the
// responses back in request order per connection — bytes with writev straight from the
// handler's buffers (arena chunks) and segment data with sendfile from the page cache.
//
// Concurrency. gnet runs one event loop per core; OnTraffic and everything that reads a
// socket or closes a connection run on the loop that owns the connection, and never
// block. A Handler gets each request on the loop and must not block either: it hands the
// work to a shard (or does it inline) and returns. The shard answers with Conn.Respond,
// which is safe from any goroutine: it fills the request's slot and, when the answer is
// at the head of the queue, writes what is ready there itself; when another writer holds
// the connection, that writer looks at the queue again before it lets go; an answer with
// a file region or over 256 KiB is left to the loop, woken for it (gnet's Conn.Wake)
// (send.go). Conn.wmu, held by whoever writes, is taken
// before Conn.mu; Conn.mu, the inbound budget's lock and the buffer pool's lock are
// leaves: no other lock is taken under them, and none is held across a call into the
// handler.
//
// Writing. netio never uses gnet's outbound buffer (it grows without bound and cannot be
// combined with sendfile): it writes with writev and sendfile on the non-blocking socket
// itself. On EAGAIN it waits for writability on Go's netpoller through a dup of the
// socket (one goroutine per blocked connection, re-checking with poll because a
// RawConn.Write wait clears the readiness it reports), then resumes on the loop. A slow
// consumer therefore costs its connection a parked goroutine, never its loop.
//
// Limits. A frame larger than MaxFrame (or than a connection's own lower limit, which
// the handler sets with Conn.LimitFrames, as the broker does for connections that have
// not authenticated) is refused from its length field, before anything is allocated; a malformed frame is answered with an error frame and the connection
// closed after it is written. gnet cannot stop reading a socket or push back on a client:
// it reads whatever arrives and calls OnTraffic (at most 1 KiB per readable event: netio
// reads the rest of a cut frame itself, straight into its own buffer, receive.go), and
// keeps what OnTraffic leaves in a buffer of its own that grows without bound and goes to
// a process-wide pool when the connection closes. So netio takes every byte gnet read (reader.go): whole frames go to
// the handler in place, the rest into memory netio maps itself (inbuf.go), charged to one
// broker-wide inbound budget (MaxInboundTotal) and capped per connection (MaxInbound) in
// every state, including while the connection takes no requests. Half of the budget is
// kept for connections holding little (budget.go says why), so a huge or stalled frame
// never crowds out ordinary requests; a connection the budget will not take more of is
// answered with busy and closed, which is the only backpressure gnet allows. A partial
// frame that receives nothing for FrameTimeout is answered with timeout and closed; a
// connection whose socket takes no byte of its answers for SendTimeout is closed, and its
// answers dropped with what they hold (writer.go's waitWritable). Idle
// inbound buffers are pooled up to 16 MiB and unmapped beyond, so closing a connection
// gives its memory back at once.
//
// A connection takes at most MaxInflight requests at a time, and no further fetch while
// its answers (bytes in memory, such as arena chunks, not yet written, plus what the
// fetches it took may answer) hold its outbound share (MaxOutbound) or the outbound budget
// (MaxOutboundTotal) is spent; a fetch asking for more than the room left has its MaxBytes
// lowered to it. A connection holding nothing may always take one fetch, so the budget is
// exceeded by at most one batch per connection. Meanwhile its requests wait in its inbound
// buffer, bounded as above, and its parked long polls are released so that they do not
// hold it up.
package netio
